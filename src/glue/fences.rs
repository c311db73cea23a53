//! The server-wide fencing-token counter (see `core::fence`).

use std::sync::Mutex;

use crate::core::fence::FenceCounter;

static COUNTER: Mutex<FenceCounter> = Mutex::new(FenceCounter::new());

pub fn with<R>(f: impl FnOnce(&mut FenceCounter) -> R) -> R {
    let mut c = COUNTER.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut c)
}

pub fn observe(fence: u64) {
    with(|c| c.observe(fence))
}

pub fn last() -> u64 {
    with(|c| c.last())
}
