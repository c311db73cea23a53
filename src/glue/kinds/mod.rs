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
use crate::core::lock::Lock;
use crate::core::rwlock::RwLock;
use crate::core::semaphore::Semaphore;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::types::{with_kinds, Value};

/// What the glue does with one kind beyond its data type
/// (`types::Value`): every registry that expands `types::with_kinds!`
/// over it (`thaw` below, `commands::Family`) needs the whole of it, so a
/// kind listed there with a part missing does not compile.
pub trait Kind: Value {
    /// Sets one holder's lease (the `KEEP` timer, `thaw`).
    const RENEW: keep::Renew;
    /// Each lease held far away (`core::keep::KEPT_BASE`) with the ttl it
    /// was kept for, given the key's expiry.
    fn kept(&self, key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)>;
}

impl Kind for Lock {
    const RENEW: keep::Renew = lock::renew;
    fn kept(&self, key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        key_expire
            .and_then(kept_ttl)
            .map(|t| (self.holder.to_vec(), t))
            .into_iter()
            .collect()
    }
}

impl Kind for Semaphore {
    const RENEW: keep::Renew = sem::renew;
    fn kept(&self, _key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        kept_of(self.holders().map(|(h, e)| (h, e.deadline_ms)))
    }
}

impl Kind for RwLock {
    const RENEW: keep::Renew = rwlock::renew;
    fn kept(&self, _key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        kept_of(self.holders().map(|(h, e)| (h, e.deadline_ms)))
    }
}

/// Each lease at `name` held far away (`core::keep::KEPT_BASE`) with no
/// binding here gets its ttl from `now`, written and sent as a real
/// deadline: what a promoted replica, a restart or a key's new home does
/// with a lease that was bound before (`keep::thaw`).
pub fn thaw(ctx: &Context, name: &RedisString, now: i64) {
    let (kept, renew) = {
        let mut key = Key::read(ctx, name);
        let expire = key.expire_at();
        macro_rules! find {
            ($($t:ty),*) => {
                $( if let Ok(Some(v)) = key.value::<$t>() {
                    (v.kept(expire), <$t as Kind>::RENEW)
                } else )* {
                    return;
                }
            };
        }
        with_kinds!(find)
    };
    for (holder, ttl) in kept {
        if !keep::is_bound(ctx, name, &holder) {
            // An error: the hold is gone (nothing to give a ttl).
            let _ = renew(ctx, name, &holder, ttl, None, now);
        }
    }
}
