//! One home per lock kind: how a kind's rules (`core`) meet its keys. Each
//! file decides on the stored value, writes through the one commit step
//! (`commit`), and offers its blocking requests to the waiting engine as
//! `waiting::Want`s. Commands parse and reply; the engine queues and hands
//! off; neither knows what a grant means for a kind.

pub mod effect;
mod leased;
pub mod lock;
pub mod rwlock;
pub mod sem;

use redis_module::{Context, RedisString};

use crate::core::keep::{kept_of, kept_ttl};
use crate::core::rwlock::RwLock;
use crate::glue::keep;
use crate::glue::key::Key;

/// Each lease at `name` held far away (`core::keep::KEPT_BASE`) with no
/// binding here gets its ttl from `now`, written and sent as a real
/// deadline: what a promoted replica, a restart or a key's new home does
/// with a lease that was bound before (`keep::thaw`).
pub fn thaw(ctx: &Context, name: &RedisString, now: i64) {
    let (kept, kind) = {
        let mut key = Key::read(ctx, name);
        let expire = key.expire_at();
        if let Ok(Some(l)) = key.lock() {
            let kept = expire.and_then(kept_ttl).map(|t| (l.holder.to_vec(), t));
            (kept.into_iter().collect(), lock::renew as keep::Renew)
        } else if let Ok(Some(s)) = key.sem() {
            (
                kept_of(s.holders().map(|(h, e)| (h, e.deadline_ms))),
                sem::renew as keep::Renew,
            )
        } else if let Ok(Some(rw)) = key.value::<RwLock>() {
            let kept = kept_of(rw.holders().map(|(h, e)| (h, e.deadline_ms)));
            (kept, rwlock::renew as keep::Renew)
        } else {
            return;
        }
    };
    for (holder, ttl) in kept {
        if !keep::is_bound(ctx, name, &holder) {
            // An error: the hold is gone (nothing to give a ttl).
            let _ = kind(ctx, name, &holder, ttl, None, now);
        }
    }
}
