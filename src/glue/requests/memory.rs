//! The memory of request-ids itself, and its bounds from the config: the
//! bottom of `requests`, which the data types' persistence reads too.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;

use crate::core::ids::{Bounds, Memory};
use crate::glue::blocking::OneShot;
use crate::glue::config;

thread_local! {
    static MEMORY: RefCell<Memory> = RefCell::new(Memory::default());
    /// The prune timer (its callback is `prune`'s): kept here, so that a
    /// load can set it going without reaching above the memory.
    pub static TIMER: OneShot = const { OneShot::new() };
}

/// Makes sure the prune timer comes when the first group is due.
pub fn rearm(now: i64) {
    arm_for(with(|m| m.next_due()), now);
}

/// `rearm` with the first due time already read.
pub fn arm_for(due: Option<i64>, now: i64) {
    if let Some(at) = due {
        TIMER.with(|t| t.arm(at.max(now + 1)));
    }
}

pub fn with<R>(f: impl FnOnce(&mut Memory) -> R) -> R {
    MEMORY.with(|m| f(&mut m.borrow_mut()))
}

/// `with`, unless the memory is busy: then None.
pub fn try_with<R>(f: impl FnOnce(&mut Memory) -> R) -> Option<R> {
    MEMORY.with(|m| m.try_borrow_mut().ok().map(|mut m| f(&mut m)))
}

pub fn bounds() -> Bounds {
    Bounds {
        memory_ms: config::ID_MEMORY_MS.load(Relaxed),
        per_holder: config::MAX_IDS_PER_HOLDER.load(Relaxed) as usize,
    }
}
