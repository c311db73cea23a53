//! A semaphore as stored (RDB, `RESTORE`, `PADLOCK.SEMSET`): see `crate::stored`.

use crate::bounds::MAX_PERMITS;
use crate::semaphore::Semaphore;
use crate::since::Since;
use crate::stored::{deadline, holder, Invalid};

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
pub fn sem_holder(h: &[u8], permits: u64, deadline_ms: i64, leaving: bool) -> Result<(), Invalid> {
    holder(h)?;
    if permits == 0 && leaving {
        return Ok(());
    }
    if !(1..=MAX_PERMITS).contains(&permits) {
        return Err("permits out of range");
    }
    deadline(deadline_ms)
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
        sem_holder(h, permits, deadline_ms, false)?;
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
