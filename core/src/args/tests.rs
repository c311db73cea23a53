use super::*;
use crate::lock::args::*;
use crate::rwlock::args::*;
use crate::rwlock::Mode;
use crate::semaphore::args::*;

fn v(s: &str) -> Vec<&[u8]> {
    s.split(' ').map(str::as_bytes).collect()
}

#[test]
fn integers_are_strict() {
    assert_eq!(parse_int(b"42"), Some(42));
    assert_eq!(parse_int(b"-7"), Some(-7));
    for bad in [
        &b""[..],
        b"+1",
        b" 1",
        b"1 ",
        b"1.5",
        b"0x10",
        b"-",
        b"99999999999999999999",
        b"0100",
        b"00",
        b"-0",
        b"-01",
    ] {
        assert_eq!(parse_int(bad), None, "{bad:?}");
    }
}

#[test]
fn integers_at_the_edges() {
    assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
    assert_eq!(parse_int(b"9223372036854775808"), None);
    assert_eq!(parse_int(b"-9223372036854775809"), None);
    assert_eq!(parse_int(b"--1"), None);
}

proptest::proptest! {
    /// The hand-written parser agrees with std's, limited to Redis' form
    /// (no `+`, no spaces, no leading zero but in `0` itself).
    #[test]
    fn integers_match_std(s in "-?[0-9+ a]{0,21}") {
        let digits = s.strip_prefix('-').unwrap_or(&s);
        let std_form = !s.contains('+')
            && digits.len() <= 19
            && !(digits.starts_with('0') && s != "0");
        let expected = if std_form { s.parse::<i64>().ok() } else { None };
        proptest::prop_assert_eq!(parse_int(s.as_bytes()), expected);
    }
}

#[test]
fn acquire_parses_and_bounds() {
    let l = Limits::default();
    let a = v("k h 5000");
    let r = lock_acquire(&a, &l).unwrap();
    assert_eq!(
        (r.key.bytes(), r.holder, r.ttl_ms, r.block_ms),
        (&b"k"[..], &b"h"[..], 5000, None)
    );
    let a = v("k h 5000 block 0");
    assert_eq!(lock_acquire(&a, &l).unwrap().block_ms, Some(0));
    assert_eq!(lock_acquire(&v("k h"), &l).unwrap_err(), Error::Arity);
    assert!(matches!(
        lock_acquire(&v("k h 0"), &l),
        Err(Error::Range { name: "ttl-ms", .. })
    ));
    assert!(matches!(
        lock_acquire(&v("k h 86400001"), &l),
        Err(Error::Range { .. })
    ));
    assert!(matches!(
        lock_acquire(&v("k h x"), &l),
        Err(Error::Range { .. })
    ));
    assert_eq!(
        lock_acquire(&v("k h 10 BLOCK"), &l).unwrap_err(),
        Error::Syntax
    );
    assert_eq!(
        lock_acquire(&v("k h 10 NOPE 1"), &l).unwrap_err(),
        Error::Syntax
    );
    assert!(matches!(
        lock_acquire(&v("k h 10 BLOCK -1"), &l),
        Err(Error::Range {
            name: "timeout-ms",
            ..
        })
    ));
}

#[test]
fn holder_length_is_bounded() {
    let l = Limits {
        max_ttl_ms: 10,
        max_holder_len: 3,
    };
    let empty: Vec<&[u8]> = vec![b"k", b"", b"5"];
    assert_eq!(
        lock_acquire(&empty, &l).unwrap_err(),
        Error::HolderLength { max: 3 }
    );
    assert!(lock_acquire(&v("k abcd 5"), &l).is_err());
    assert!(lock_acquire(&v("k abc 5"), &l).is_ok());
}

#[test]
fn multi_key_forms() {
    let l = Limits::default();
    let a = v("2 a b h 100 BLOCK 5");
    let r = lock_macquire(&a, &l).unwrap();
    assert_eq!(r.keys.len(), 2);
    assert_eq!((r.holder, r.ttl_ms, r.block_ms), (&b"h"[..], 100, Some(5)));
    assert_eq!(
        lock_macquire(&v("3 a b h 100"), &l).unwrap_err(),
        Error::Arity
    );
    assert!(matches!(
        lock_macquire(&v("0 h 100"), &l),
        Err(Error::Range {
            name: "numkeys",
            ..
        })
    ));
    assert_eq!(
        lock_macquire(&v("2 a a h 100"), &l).unwrap_err(),
        Error::DuplicateKey(b"a".to_vec())
    );
    assert_eq!(lock_mrelease(&v("2 a b h"), &l).unwrap().keys.len(), 2);
    assert_eq!(
        lock_mrelease(&v("2 a b h x"), &l).unwrap_err(),
        Error::Arity
    );
}

#[test]
fn semaphore_forms() {
    let l = Limits::default();
    let a = v("s h 3 100 PERMITS 2 BLOCK 50");
    let r = sem_acquire(&a, &l).unwrap();
    assert_eq!((r.limit, r.permits, r.block_ms), (3, 2, Some(50)));
    assert_eq!(
        sem_acquire(&v("s h 3 100 PERMITS 4"), &l).unwrap_err(),
        Error::PermitsOverLimit
    );
    assert!(matches!(
        sem_acquire(&v("s h 0 100"), &l),
        Err(Error::Range { name: "limit", .. })
    ));
    assert!(matches!(
        sem_acquire(&v("s h 2147483648 100"), &l),
        Err(Error::Range { .. })
    ));
    assert!(matches!(
        sem_acquire(&v("s h 3 100 PERMITS 0"), &l),
        Err(Error::Range {
            name: "PERMITS",
            ..
        })
    ));
    assert_eq!(sem_release(&v("s h"), &l).unwrap().permits, None);
    assert_eq!(
        sem_release(&v("s h PERMITS 2"), &l).unwrap().permits,
        Some(2)
    );
    assert_eq!(
        sem_release(&v("s h PERMITS"), &l).unwrap_err(),
        Error::Syntax
    );
    assert_eq!(
        sem_extend(&v("s h 10 PERMITS 3"), &l).unwrap().permits,
        Some(3)
    );
}

#[test]
fn rwlock_arguments() {
    let l = Limits::default();
    let a = v("k h read 5000 BLOCK 10");
    let r = rw_acquire(&a, &l).unwrap();
    assert_eq!((r.mode, r.ttl_ms, r.block_ms), (Mode::Read, 5000, Some(10)));
    assert_eq!(rw_acquire(&v("k h Write 1"), &l).unwrap().mode, Mode::Write);
    assert_eq!(rw_acquire(&v("k h READS 1"), &l).unwrap_err(), Error::Mode);
    assert_eq!(
        rw_acquire(&v("k h READ 0"), &l).unwrap_err().message(),
        "ERR ttl-ms must be an integer from 1 to 86400000"
    );
    assert_eq!(
        rw_acquire(&v("k h READ 1 KEEPALIVE"), &l).unwrap_err(),
        Error::Syntax
    );
    assert_eq!(rw_acquire(&v("k h READ"), &l).unwrap_err(), Error::Arity);
    assert_eq!(rw_release(&v("k h WRITE"), &l).unwrap().mode, Mode::Write);
    assert_eq!(rw_release(&v("k h WRITE 1"), &l).unwrap_err(), Error::Arity);
    assert_eq!(rw_release(&v("k h BOTH"), &l).unwrap_err(), Error::Mode);
}

#[test]
fn keep_anywhere_once_and_only_where_a_lease_is_taken() {
    let l = Limits::default();
    assert!(lock_acquire(&v("k h 100 KEEP BLOCK 5"), &l).unwrap().keep);
    assert!(lock_acquire(&v("k h 100 BLOCK 5 keep"), &l).unwrap().keep);
    assert!(!lock_acquire(&v("k h 100 BLOCK 5"), &l).unwrap().keep);
    assert_eq!(
        lock_acquire(&v("k h 100 KEEP KEEP"), &l)
            .unwrap_err()
            .message(),
        "ERR KEEP given twice"
    );
    assert!(key_holder_ttl_keep(&v("k h 100 KEEP"), &l).unwrap().keep);
    assert_eq!(
        key_holder_ttl_keep(&v("k h 100 MORE"), &l).unwrap_err(),
        Error::Syntax
    );
    assert_eq!(
        key_holder_ttl(&v("k h 100 KEEP"), &l).unwrap_err(),
        Error::Arity
    );
    let a = v("s h 100 KEEP PERMITS 2");
    let s = sem_extend(&a, &l).unwrap();
    assert_eq!((s.keep, s.permits), (true, Some(2)));
    assert_eq!(sem_release(&v("s h KEEP"), &l).unwrap_err(), Error::Syntax);
    assert!(
        sem_acquire(&v("s h 3 100 PERMITS 2 KEEP BLOCK 1"), &l)
            .unwrap()
            .keep
    );
    assert!(lock_macquire(&v("2 a b h 100 KEEP"), &l).unwrap().keep);
    assert!(rw_acquire(&v("k h READ 100 KEEP"), &l).unwrap().keep);
    assert_eq!(
        rw_release(&v("k h READ KEEP"), &l).unwrap_err(),
        Error::Arity
    );
}

#[test]
fn mailbox_goes_with_block_on_acquires_and_keep_on_extends() {
    let l = Limits::default();
    let a = v("k h 100 BLOCK 5 MAILBOX mb KEEP");
    let r = lock_acquire(&a, &l).unwrap();
    assert_eq!(r.mailbox.map(|m| m.bytes()), Some(&b"mb"[..]));
    assert_eq!(r.block_ms, Some(5));
    assert!(r.keep);
    let a = v("k h 100 mailbox mb block 0");
    assert!(lock_acquire(&a, &l).unwrap().mailbox.is_some());
    for bad in ["k h 100 MAILBOX mb", "k h 100 KEEP MAILBOX mb"] {
        let a = v(bad);
        assert!(
            matches!(lock_acquire(&a, &l), Err(Error::Invalid(m)) if m == MAILBOX_NEEDS_BLOCK),
            "{bad}"
        );
    }
    let a = v("k h 100 BLOCK 5 MAILBOX");
    assert!(matches!(lock_acquire(&a, &l), Err(Error::Syntax)));
    let a = v("2 a b h 100 BLOCK 5 MAILBOX mb");
    assert!(lock_macquire(&a, &l).unwrap().mailbox.is_some());
    let a = v("k h 3 100 PERMITS 2 BLOCK 5 MAILBOX mb");
    let s = sem_acquire(&a, &l).unwrap();
    assert_eq!((s.permits, s.mailbox.is_some()), (2, true));
    let a = v("k h READ 100 BLOCK 5 MAILBOX mb");
    assert!(rw_acquire(&a, &l).unwrap().mailbox.is_some());
    // Extends: with KEEP only; reenter and release take none.
    let a = v("k h 100 KEEP MAILBOX mb");
    assert!(key_holder_ttl_extend(&a, &l).unwrap().mailbox.is_some());
    let a = v("k h 100 MAILBOX mb");
    assert!(
        matches!(key_holder_ttl_extend(&a, &l), Err(Error::Invalid(m)) if m == MAILBOX_NEEDS_KEEP)
    );
    let a = v("k h 100 KEEP MAILBOX mb");
    assert!(matches!(key_holder_ttl_keep(&a, &l), Err(Error::Syntax)));
    let a = v("k h 100 PERMITS 1 KEEP MAILBOX mb");
    assert!(sem_extend(&a, &l).unwrap().mailbox.is_some());
    let a = v("k h MAILBOX mb");
    assert!(matches!(sem_release(&a, &l), Err(Error::Syntax)));
}
