use super::*;

#[test]
fn only_unimplemented_falls_back_to_event_feed() {
    assert!(should_fall_back(&Status::unimplemented(
        "unknown feature stream-multiplexing"
    )));
    assert!(!should_fall_back(&Status::unavailable("store is stopped")));
    assert!(!should_fall_back(&Status::internal("boom")));
}
