//! The server-wide fencing-token counter (see `core::fence`).

use std::sync::Mutex;

use redis_module::Context;

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

/// Atomic slot migration (Redis 8.4+), from the source's propagate event:
/// `padlock.fencefloor <last>` goes to the destination with the slots.
pub fn propagate_floor(ctx: &Context) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(last());
    // SAFETY: called from the migration's propagate event with its
    // context; the format names one buffer argument that lives until the
    // call returns.
    unsafe {
        if let Some(propagate) = redis_module::raw::RedisModule_ClusterPropagateForSlotMigration {
            propagate(
                ctx.ctx,
                c"padlock.fencefloor".as_ptr(),
                c"b".as_ptr(),
                digits.as_ptr() as *const std::os::raw::c_char,
                digits.len(),
            );
        }
    }
}
