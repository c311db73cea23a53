//! A read-write lock as stored (RDB, `RESTORE`, `PADLOCK.RWSET`): see `crate::stored`.

use crate::bounds::MAX_COUNT;
use crate::rwlock::{self, RwLock};
use crate::stored::{deadline, fence, holder, Invalid};

/// One read-write lock holder; no holds at all (an effect that removes the
/// holder) only where `leaving` allows it.
pub fn rw_entry(h: &[u8], e: &rwlock::Entry, leaving: bool) -> Result<(), Invalid> {
    holder(h)?;
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
        rw_entry(h, &e, false)?;
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
