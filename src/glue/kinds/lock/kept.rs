//! A lock's lease kept alive (`KEEP`): renewed, announced, bound.

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::lock;
use crate::glue::commit::{commit, Note};
use crate::glue::keep;
use crate::glue::key::Key;

/// `KEEP`: the holder's lease, reset while it still holds the grant with
/// `fence`.
pub fn renew(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    fence: Option<u64>,
    now: i64,
) -> Result<(), Error> {
    let mut key = Key::write(ctx, name);
    let effect = {
        let cur = key.lock()?.filter(|l| fence.is_none_or(|f| l.fence == f));
        lock::extend(name.as_slice(), cur.as_deref(), holder, ttl_ms, now)?
    };
    commit(ctx, name, key, effect, Note::default());
    Ok(())
}

/// Binds the lease of the grant with `fence` to `client` (`KEEP`).
pub fn keep(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: Option<u64>,
    ttl_ms: i64,
    fence: u64,
) {
    if let Some(c) = client {
        keep::bind(ctx, name, holder, c, ttl_ms, renew, Some(fence));
    }
}

/// Binds the lease the holder has now (after `LOCK.REENTER`/`EXTEND`).
pub fn keep_held(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: Option<u64>,
    ttl_ms: i64,
) {
    // Without `KEEP` (the usual case) the key is not read again.
    if client.is_none() {
        return;
    }
    let fence = {
        let mut key = Key::read(ctx, name);
        match key.lock() {
            Ok(Some(l)) if *l.holder == *holder => l.fence,
            _ => return,
        }
    };
    keep(ctx, name, holder, client, ttl_ms, fence);
}
