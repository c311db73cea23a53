//! One home per lock kind: how a kind's rules (`core`) meet its keys. Each
//! file decides on the stored value, writes through the one commit step
//! (`commit`), and offers its blocking requests to the waiting engine as
//! `waiting::Want`s. Commands parse and reply; the engine queues and hands
//! off; neither knows what a grant means for a kind.

mod leased;
pub mod lock;
pub mod registry;
pub mod rwlock;
pub mod sem;
pub mod state;

pub(crate) use registry::with_kinds;

use redis_module::{Context, RedisString};

use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::types::Value;

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
    /// When the holder's lease ends (None: it holds nothing here), given
    /// the key's expiry.
    fn lease_end(&self, holder: &[u8], key_expire: Option<i64>) -> Option<i64>;
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

/// When the holder's lease at `name` ends (None: it holds nothing there):
/// how `keep` learns that a hold whose binding ended has run out in a key
/// that stays (`keep::lost`).
pub fn lease_end(ctx: &Context, name: &RedisString, holder: &[u8]) -> Option<i64> {
    let mut key = Key::read(ctx, name);
    let expire = key.expire_at();
    macro_rules! find {
        ($($t:ty),*) => {
            $( if let Ok(Some(v)) = key.value::<$t>() {
                return v.lease_end(holder, expire);
            } )*
        };
    }
    with_kinds!(find);
    None
}
