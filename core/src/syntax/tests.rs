use super::*;

const LINES: &[&str] = &[
    "key holder ttl-ms [BLOCK timeout-ms] [KEEP]",
    "numkeys key [key ...] holder ttl-ms [BLOCK timeout-ms] [KEEP]",
    "key holder limit ttl-ms [PERMITS n] [BLOCK timeout-ms] [KEEP]",
    "key holder READ|WRITE ttl-ms [BLOCK timeout-ms] [KEEP]",
    "key holder reads writes fence deadline-ms",
    "key holder ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]",
    "key holder ttl-ms [KEEP [MAILBOX mailbox-key]] [ID request-id]",
    "",
];

#[test]
fn lines_survive_the_round_trip() {
    for line in LINES {
        assert_eq!(render(&parse(line).unwrap()), *line);
    }
}

#[test]
fn arguments_get_their_kinds() {
    let args = parse("numkeys key [key ...] holder READ|WRITE [BLOCK timeout-ms] [KEEP]").unwrap();
    let kinds: Vec<Kind> = args.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Integer,
            Kind::Key,
            Kind::String,
            Kind::OneOf,
            Kind::Integer,
            Kind::PureToken
        ]
    );
    assert!(args[1].multiple && !args[0].multiple);
    assert_eq!(args[4].token.as_deref(), Some("BLOCK"));
    assert!(args[4].optional && args[5].optional && !args[3].optional);
    assert_eq!(args[3].choices.len(), 2);
}

#[test]
fn broken_lines_are_refused() {
    assert!(parse("key [BLOCK timeout-ms").is_err());
    assert!(parse("[key ...]").is_err());
    assert!(parse("key holder [n ...]").is_err());
    assert!(parse("key [a b c]").is_err());
    assert!(parse("key [BLOCK timeout-ms [MAILBOX mailbox-key]").is_err());
    assert!(parse("key ]").is_err());
}

#[test]
fn a_keyword_with_an_optional_tail_is_a_block() {
    let args = parse("key [BLOCK timeout-ms [MAILBOX mailbox-key]]").unwrap();
    let b = &args[1];
    assert_eq!(
        (b.kind, b.token.as_deref(), b.optional),
        (Kind::Block, Some("BLOCK"), true)
    );
    assert_eq!(b.choices.len(), 2);
    assert_eq!(b.choices[0].kind, Kind::Integer);
    assert!(!b.choices[0].optional && b.choices[1].optional);
    assert_eq!(b.choices[1].token.as_deref(), Some("MAILBOX"));
}
