//! A lock's lease bound to a connection (`KEEP`): written, bound.

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::lock::{self, Lock};
use crate::glue::commit::{commit, Note};
use crate::glue::keep;
use crate::glue::key::Key;

/// `KEEP`: the holder's lease set to `ttl_ms` from `now` (far away while
/// it is bound), while it still holds the grant with `fence`.
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
        let cur = key
            .value::<Lock>()?
            .filter(|l| fence.is_none_or(|f| l.fence == f));
        lock::extend(name.as_slice(), cur.as_deref(), holder, ttl_ms, now)?
    };
    commit(ctx, name, key, effect, Note::default());
    Ok(())
}

/// Binds the lease of the grant with `fence` to `client` (`KEEP`).
#[inline]
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
    keep::bind_held(ctx, name, holder, client, ttl_ms, renew, |key| {
        let lock = key.value::<Lock>().ok().flatten()?;
        (*lock.holder == *holder).then_some(lock.fence)
    });
}
