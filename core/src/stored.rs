//! What a value read back from outside (an RDB file, a `RESTORE` payload,
//! a replication stream) must satisfy before it becomes a value. Such bytes
//! may be damaged or forged; a value that breaks an invariant the rules rely
//! on (a count of 0, an empty holder, permits past every bound) would make
//! later commands misbehave long after the load, so it is refused whole.
//! The state commands (replication, AOF) check their states here too: one
//! definition of a valid state, so what the server accepts it can save,
//! load, `DUMP` and `RESTORE` again.

use super::bounds::{MAX_COUNT, MAX_DEADLINE_MS, MAX_FENCE, MAX_HOLDER_LEN, MAX_PERMITS};
use super::lock::Lock;
use super::rwlock::{self, RwLock};
use super::semaphore::Semaphore;
use super::since::Since;

/// Why a stored value was refused (for the server log, or the effect
/// command's error reply).
pub type Invalid = &'static str;

/// A holder name; `max` is the ceiling for loaded values and
/// `max-holder-len` for state commands.
pub fn holder(h: &[u8], max: usize) -> Result<(), Invalid> {
    match h.len() {
        0 => Err("empty holder"),
        n if n > max.min(MAX_HOLDER_LEN) => Err("holder longer than max-holder-len"),
        _ => Ok(()),
    }
}

fn deadline(d: i64) -> Result<(), Invalid> {
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

fn fence(f: u64) -> Result<(), Invalid> {
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

/// A lock as stored: the RDB loader and `PADLOCK.LOCKSET` both build it
/// here.
pub fn lock(h: &[u8], max_holder: usize, count: u64, f: u64) -> Result<Lock, Invalid> {
    holder(h, max_holder)?;
    let count = u32::try_from(count)
        .ok()
        .filter(|c| (1..=MAX_COUNT).contains(&u64::from(*c)))
        .ok_or("reentry count out of range")?;
    fence(f)?;
    Ok(Lock {
        holder: h.into(),
        count,
        fence: f,
        since: Since::UNKNOWN,
    })
}

/// A semaphore limit.
pub fn limit(limit: u64) -> Result<(), Invalid> {
    if (1..=MAX_PERMITS).contains(&limit) {
        Ok(())
    } else {
        Err("limit out of range")
    }
}

/// One semaphore holder; permits 0 (an effect that removes the holder)
/// only where `leaving` allows it.
pub fn sem_holder(
    h: &[u8],
    max_holder: usize,
    permits: u64,
    deadline_ms: i64,
    leaving: bool,
) -> Result<(), Invalid> {
    holder(h, max_holder)?;
    if permits == 0 && leaving {
        return Ok(());
    }
    if !(1..=MAX_PERMITS).contains(&permits) {
        return Err("permits out of range");
    }
    deadline(deadline_ms)
}

/// One read-write lock holder; no holds at all (an effect that removes the
/// holder) only where `leaving` allows it.
pub fn rw_entry(
    h: &[u8],
    max_holder: usize,
    e: &rwlock::Entry,
    leaving: bool,
) -> Result<(), Invalid> {
    holder(h, max_holder)?;
    if e.reads == 0 && e.writes == 0 && leaving {
        return Ok(());
    }
    if e.reads > MAX_COUNT || e.writes > MAX_COUNT || e.reads + e.writes == 0 {
        return Err("hold count out of range");
    }
    fence(e.fence)?;
    deadline(e.deadline_ms)
}

/// Whether `h` may hold `e` beside the holders `rw` has: a writer is alone
/// (but for its own read holds).
pub fn rw_fits(rw: &RwLock, h: &[u8], e: &rwlock::Entry) -> Result<(), Invalid> {
    let holds = e.reads + e.writes > 0;
    let others = rw.holders().any(|(x, _)| x != h);
    if holds && (rw.writer().is_some_and(|w| w != h) || (e.writes > 0 && others)) {
        return Err("a writer beside another holder");
    }
    Ok(())
}

/// Builds a semaphore holder by holder, checking each as it arrives, so a
/// damaged holder count fails at the first bad holder instead of
/// allocating for a count nobody wrote.
pub struct SemaphoreLoader {
    sem: Semaphore,
}

impl SemaphoreLoader {
    pub fn new(l: u64, holders: u64) -> Result<Self, Invalid> {
        limit(l)?;
        if holders == 0 {
            return Err("semaphore without holders");
        }
        Ok(SemaphoreLoader {
            sem: Semaphore::new(l),
        })
    }

    pub fn holder(&mut self, h: &[u8], permits: u64, deadline_ms: i64) -> Result<(), Invalid> {
        sem_holder(h, MAX_HOLDER_LEN, permits, deadline_ms, false)?;
        if self.sem.holder(h).is_some() {
            return Err("holder named twice");
        }
        self.sem.set_holder(h, permits, deadline_ms, Since::UNKNOWN);
        Ok(())
    }

    pub fn finish(self) -> Semaphore {
        self.sem
    }
}

/// Builds a read-write lock holder by holder, like `SemaphoreLoader`, and
/// refuses a writer beside another holder.
pub struct RwLockLoader {
    rw: RwLock,
}

impl RwLockLoader {
    pub fn new(holders: u64) -> Result<Self, Invalid> {
        if holders == 0 {
            return Err("read-write lock without holders");
        }
        Ok(RwLockLoader {
            rw: RwLock::default(),
        })
    }

    pub fn holder(&mut self, h: &[u8], e: rwlock::Entry) -> Result<(), Invalid> {
        rw_entry(h, MAX_HOLDER_LEN, &e, false)?;
        if self.rw.holder(h).is_some() {
            return Err("holder named twice");
        }
        rw_fits(&self.rw, h, &e)?;
        self.rw.apply(&rwlock::Effect::set(h, e));
        Ok(())
    }

    pub fn finish(self) -> RwLock {
        self.rw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: usize = MAX_HOLDER_LEN;

    #[test]
    fn locks() {
        assert!(lock(b"a", M, 1, 1).is_ok());
        assert!(lock(b"", M, 1, 1).is_err());
        assert!(lock(&[b'x'; MAX_HOLDER_LEN + 1], M, 1, 1).is_err());
        assert!(lock(b"abc", 2, 1, 1).is_err(), "longer than max-holder-len");
        assert!(lock(b"a", M, 0, 1).is_err());
        assert!(lock(b"a", M, 1, 0).is_err());
        assert!(lock(b"a", M, u64::MAX, 1).is_err());
        assert!(lock(b"a", M, MAX_COUNT + 1, 1).is_err());
        assert!(lock(b"a", M, MAX_COUNT, MAX_FENCE).is_ok());
        assert!(lock(b"a", M, 1, MAX_FENCE + 1).is_err());
        assert!(lock(b"a", M, 1, i64::MAX as u64).is_err());
    }

    #[test]
    fn effects() {
        assert!(key_deadline(0).is_ok());
        assert!(key_deadline(MAX_DEADLINE_MS).is_ok());
        assert!(key_deadline(MAX_DEADLINE_MS + 1).is_err());
        assert!(key_deadline(-1).is_err());
        assert!(sem_holder(b"h", M, 0, 0, true).is_ok(), "a holder leaving");
        assert!(sem_holder(b"h", M, 0, 0, false).is_err());
        assert!(sem_holder(b"h", M, 2, i64::MAX, true).is_err());
        assert!(sem_holder(b"h", M, 2, 0, true).is_err());
        let none = rwlock::Entry {
            reads: 0,
            writes: 0,
            fence: 0,
            deadline_ms: 0,
            since: Since::UNKNOWN,
        };
        assert!(rw_entry(b"h", M, &none, true).is_ok());
        assert!(rw_entry(b"h", M, &none, false).is_err());
        let big = rwlock::Entry {
            reads: 1,
            fence: MAX_FENCE + 1,
            deadline_ms: 5,
            ..none
        };
        assert!(rw_entry(b"h", M, &big, true).is_err());
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
