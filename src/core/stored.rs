//! What a value read back from outside (an RDB file, a `RESTORE` payload,
//! a replication stream) must satisfy before it becomes a value. Such bytes
//! may be damaged or forged; a value that breaks an invariant the rules rely
//! on (a count of 0, an empty holder, permits past every bound) would make
//! later commands misbehave long after the load, so it is refused whole.

use super::lock::Lock;
use super::rwlock::{self, RwLock};
use super::semaphore::Semaphore;

/// Longest holder any configuration accepts (`max-holder-len` ceiling).
pub const MAX_HOLDER_LEN: usize = 65_536;
/// Largest semaphore limit and permit count: 2^31 - 1.
pub const MAX_PERMITS: u64 = i32::MAX as u64;
/// Latest deadline accepted: far past any real lease (about 285,000 years
/// of unix ms), yet sums with a ttl can never overflow.
pub const MAX_DEADLINE_MS: i64 = 1 << 53;
/// Largest fence or reentry count: replies carry them as signed 64-bit.
pub const MAX_COUNTER: u64 = i64::MAX as u64;

/// Why a stored value was refused (for the server log).
pub type Invalid = &'static str;

fn holder(h: &[u8]) -> Result<(), Invalid> {
    match h.len() {
        0 => Err("empty holder"),
        n if n > MAX_HOLDER_LEN => Err("holder longer than 65536 bytes"),
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

/// A fencing-token counter saved beside the data.
pub fn fence_counter(v: u64) -> Result<u64, Invalid> {
    if v <= MAX_COUNTER {
        Ok(v)
    } else {
        Err("fence counter out of range")
    }
}

pub fn lock(h: &[u8], count: u64, fence: u64) -> Result<Lock, Invalid> {
    holder(h)?;
    if !(1..=MAX_COUNTER).contains(&count) {
        return Err("reentry count out of range");
    }
    if !(1..=MAX_COUNTER).contains(&fence) {
        return Err("fence out of range");
    }
    Ok(Lock {
        holder: h.into(),
        count,
        fence,
    })
}

/// Builds a semaphore holder by holder, checking each as it arrives, so a
/// damaged holder count fails at the first bad holder instead of
/// allocating for a count nobody wrote.
pub struct SemaphoreLoader {
    sem: Semaphore,
}

impl SemaphoreLoader {
    pub fn new(limit: u64, holders: u64) -> Result<Self, Invalid> {
        if !(1..=MAX_PERMITS).contains(&limit) {
            return Err("limit out of range");
        }
        if holders == 0 {
            return Err("semaphore without holders");
        }
        Ok(SemaphoreLoader {
            sem: Semaphore::new(limit),
        })
    }

    pub fn holder(&mut self, h: &[u8], permits: u64, deadline_ms: i64) -> Result<(), Invalid> {
        holder(h)?;
        if !(1..=MAX_PERMITS).contains(&permits) {
            return Err("permits out of range");
        }
        deadline(deadline_ms)?;
        if self.sem.holder(h).is_some() {
            return Err("holder named twice");
        }
        self.sem.set_holder(h, permits, deadline_ms);
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
        holder(h)?;
        if e.reads > MAX_COUNTER || e.writes > MAX_COUNTER || e.reads + e.writes == 0 {
            return Err("hold count out of range");
        }
        if !(1..=MAX_COUNTER).contains(&e.fence) {
            return Err("fence out of range");
        }
        deadline(e.deadline_ms)?;
        if self.rw.holder(h).is_some() {
            return Err("holder named twice");
        }
        if self.rw.writer().is_some() || (e.writes > 0 && !self.rw.is_empty()) {
            return Err("a writer beside another holder");
        }
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

    #[test]
    fn locks() {
        assert!(lock(b"a", 1, 1).is_ok());
        assert!(lock(b"", 1, 1).is_err());
        assert!(lock(&[b'x'; MAX_HOLDER_LEN + 1], 1, 1).is_err());
        assert!(lock(b"a", 0, 1).is_err());
        assert!(lock(b"a", 1, 0).is_err());
        assert!(lock(b"a", u64::MAX, 1).is_err());
        assert!(lock(b"a", 1, MAX_COUNTER + 1).is_err());
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
        assert!(fence_counter(u64::MAX).is_err());
    }
}
