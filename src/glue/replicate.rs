//! Effects sent to replicas and the AOF. Each names the full resulting
//! state with absolute unix-ms deadlines, so replaying it never reads a
//! clock or re-decides: a replica ends in exactly the master's state.
//!
//! `PADLOCK.LOCKSET key holder count fence deadline-ms` and
//! `PADLOCK.SEMSET key holder limit permits deadline-ms` are also what an
//! AOF rewrite writes; deadline 0 means "no expiry".

use redis_module::{Context, RedisString};

use crate::core::lock::Lock;

pub const LOCKSET: &str = "PADLOCK.LOCKSET";
pub const SEMSET: &str = "PADLOCK.SEMSET";

pub fn lock_set(ctx: &Context, key: &RedisString, lock: &Lock, deadline_ms: i64) {
    let count = lock.count.to_string();
    let fence = lock.fence.to_string();
    let deadline = deadline_ms.to_string();
    let args: [&[u8]; 5] = [
        key.as_slice(),
        &lock.holder,
        count.as_bytes(),
        fence.as_bytes(),
        deadline.as_bytes(),
    ];
    ctx.replicate(LOCKSET, &args[..]);
}

/// One semaphore holder's new state; permits 0 removes the holder (and the
/// key with its last holder).
pub fn sem_set(
    ctx: &Context,
    key: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    deadline_ms: i64,
) {
    let limit = limit.to_string();
    let permits = permits.to_string();
    let deadline = deadline_ms.to_string();
    let args: [&[u8]; 5] = [
        key.as_slice(),
        holder,
        limit.as_bytes(),
        permits.as_bytes(),
        deadline.as_bytes(),
    ];
    ctx.replicate(SEMSET, &args[..]);
}

pub fn del(ctx: &Context, key: &RedisString) {
    let args: [&[u8]; 1] = [key.as_slice()];
    ctx.replicate("DEL", &args[..]);
}
