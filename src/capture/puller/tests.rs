use super::*;

#[test]
fn backoff_grows_caps_and_jitters_deterministically() {
    let base = Duration::from_millis(20);
    let max = Duration::from_secs(2);
    let mut a = Jitter(7);
    let mut b = Jitter(7);
    assert_eq!(backoff(base, max, 0, &mut a), Duration::ZERO);
    let _ = backoff(base, max, 0, &mut b);
    for attempt in 1..20 {
        let d = backoff(base, max, attempt, &mut a);
        assert_eq!(
            d,
            backoff(base, max, attempt, &mut b),
            "same seed, same delays"
        );
        let cap = base.saturating_mul(1 << (attempt - 1).min(16)).min(max);
        assert!(
            d >= cap / 2 && d <= cap,
            "attempt {attempt}: {d:?} vs {cap:?}"
        );
    }
}
