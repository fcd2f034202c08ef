use super::shows::parse_datetime;

#[test]
fn datetime_to_epoch() {
    assert_eq!(parse_datetime("1970-01-01 00:00:00"), Some(0));
    assert_eq!(parse_datetime("2023-11-14 22:13:20"), Some(1_700_000_000));
    assert_eq!(parse_datetime("nope"), None);
}
