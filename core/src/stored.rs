//! What a value read back from outside (an RDB file, a `RESTORE` payload,
//! a replication stream) must satisfy before it becomes a value. Such bytes
//! may be damaged or forged; a value that breaks an invariant the rules rely
//! on (a count of 0, an empty holder, permits past every bound) would make
//! later commands misbehave long after the load, so it is refused whole.
//! The state commands (replication, AOF) check their states here too: one
//! definition of a valid state, so what the server accepts it can save,
//! load, `DUMP` and `RESTORE` again.

use super::bounds::{MAX_DEADLINE_MS, MAX_FENCE, MAX_HOLDER_LEN};

/// Why a stored value was refused (for the server log, or the effect
/// command's error reply).
pub type Invalid = &'static str;

/// A holder name, within the hard bound whatever `max-holder-len` says:
/// a master, or this server before the setting was lowered, judged it by
/// its own, and refusing it here would lose a hold that is kept there.
pub fn holder(h: &[u8]) -> Result<(), Invalid> {
    match h.len() {
        0 => Err("empty holder"),
        n if n > MAX_HOLDER_LEN => Err("holder longer than 65536 bytes"),
        _ => Ok(()),
    }
}

pub(crate) fn deadline(d: i64) -> Result<(), Invalid> {
    if (1..=MAX_DEADLINE_MS).contains(&d) {
        Ok(())
    } else {
        Err("deadline out of range")
    }
}

/// A key's expiry in an effect: 0 (none: an AOF rewrite sends the key's
/// expiry apart) or a valid deadline.
pub fn key_deadline(d: i64) -> Result<(), Invalid> {
    if d == 0 {
        Ok(())
    } else {
        deadline(d)
    }
}

pub(crate) fn fence(f: u64) -> Result<(), Invalid> {
    if (1..=MAX_FENCE).contains(&f) {
        Ok(())
    } else {
        Err("fence out of range")
    }
}

/// A fencing-token counter saved beside the data.
pub fn fence_counter(v: u64) -> Result<u64, Invalid> {
    if v <= MAX_FENCE {
        Ok(v)
    } else {
        Err("fence counter out of range")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::{MAX_COUNT, MAX_PERMITS};
    use crate::lock::stored::lock;
    use crate::rwlock;
    use crate::rwlock::stored::*;
    use crate::semaphore::stored::*;
    use crate::since::Since;

    #[test]
    fn locks() {
        assert!(lock(b"a", 1, 1).is_ok());
        assert!(lock(b"", 1, 1).is_err());
        assert!(lock(&[b'x'; MAX_HOLDER_LEN + 1], 1, 1).is_err());
        assert!(
            lock(&[b'x'; MAX_HOLDER_LEN], 1, 1).is_ok(),
            "whatever max-holder-len says"
        );
        assert!(lock(b"a", 0, 1).is_err());
        assert!(lock(b"a", 1, 0).is_err());
        assert!(lock(b"a", u64::MAX, 1).is_err());
        assert!(lock(b"a", MAX_COUNT + 1, 1).is_err());
        assert!(lock(b"a", MAX_COUNT, MAX_FENCE).is_ok());
        assert!(lock(b"a", 1, MAX_FENCE + 1).is_err());
        assert!(lock(b"a", 1, i64::MAX as u64).is_err());
    }

    #[test]
    fn effects() {
        assert!(key_deadline(0).is_ok());
        assert!(key_deadline(MAX_DEADLINE_MS).is_ok());
        assert!(key_deadline(MAX_DEADLINE_MS + 1).is_err());
        assert!(key_deadline(-1).is_err());
        assert!(sem_holder(b"h", 0, 0, true).is_ok(), "a holder leaving");
        assert!(sem_holder(b"h", 0, 0, false).is_err());
        assert!(sem_holder(b"h", 2, i64::MAX, true).is_err());
        assert!(sem_holder(b"h", 2, 0, true).is_err());
        let none = rwlock::Entry {
            reads: 0,
            writes: 0,
            fence: 0,
            deadline_ms: 0,
            since: Since::UNKNOWN,
        };
        assert!(rw_entry(b"h", &none, true).is_ok());
        assert!(rw_entry(b"h", &none, false).is_err());
        let big = rwlock::Entry {
            reads: 1,
            fence: MAX_FENCE + 1,
            deadline_ms: 5,
            ..none
        };
        assert!(rw_entry(b"h", &big, true).is_err());
    }

    #[test]
    fn semaphores() {
        assert!(SemaphoreLoader::new(0, 1).is_err());
        assert!(SemaphoreLoader::new(MAX_PERMITS + 1, 1).is_err());
        assert!(SemaphoreLoader::new(3, 0).is_err());
        let mut l = SemaphoreLoader::new(3, 2).unwrap();
        assert!(l.holder(b"a", 2, 100).is_ok());
        assert!(l.holder(b"a", 1, 100).is_err(), "twice");
        assert!(l.holder(b"b", 0, 100).is_err());
        assert!(l.holder(b"b", 1, 0).is_err());
        assert!(l.holder(b"b", 1, MAX_DEADLINE_MS + 1).is_err());
        assert!(l.holder(b"", 1, 100).is_err());
        assert!(l.holder(b"b", 1, 100).is_ok());
        let s = l.finish();
        assert_eq!((s.used(), s.len()), (3, 2));
    }

    #[test]
    fn rwlocks() {
        let e = |reads, writes| rwlock::Entry {
            reads,
            writes,
            fence: 7,
            deadline_ms: 100,
            since: Since::UNKNOWN,
        };
        assert!(RwLockLoader::new(0).is_err());
        let mut l = RwLockLoader::new(2).unwrap();
        assert!(l.holder(b"a", e(0, 0)).is_err(), "holds nothing");
        assert!(l.holder(b"a", e(2, 0)).is_ok());
        assert!(l.holder(b"a", e(1, 0)).is_err(), "twice");
        assert!(l.holder(b"w", e(0, 1)).is_err(), "writer beside a reader");
        assert!(l
            .holder(
                b"b",
                rwlock::Entry {
                    fence: 0,
                    ..e(1, 0)
                }
            )
            .is_err());
        assert!(l
            .holder(
                b"b",
                rwlock::Entry {
                    deadline_ms: 0,
                    ..e(1, 0)
                }
            )
            .is_err());
        assert!(l.holder(b"b", e(u64::MAX, 0)).is_err());
        assert!(l.holder(b"b", e(1, 0)).is_ok());
        assert_eq!(l.finish().len(), 2);
        let mut w = RwLockLoader::new(2).unwrap();
        assert!(w.holder(b"w", e(1, 1)).is_ok());
        assert!(w.holder(b"r", e(1, 0)).is_err(), "reader beside a writer");
    }

    #[test]
    fn counters() {
        assert_eq!(fence_counter(5), Ok(5));
        assert_eq!(fence_counter(MAX_FENCE), Ok(MAX_FENCE));
        assert!(fence_counter(MAX_FENCE + 1).is_err());
        assert!(fence_counter(u64::MAX).is_err());
    }
}
