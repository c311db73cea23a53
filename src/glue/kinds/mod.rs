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

/// What `keep` reads of a value whatever its kind (`Kind` itself, with
/// its constant, cannot be a trait object).
trait Leases {
    fn kept(&self, key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)>;
    fn lease_end(&self, holder: &[u8], key_expire: Option<i64>) -> Option<i64>;
    fn renew(&self) -> keep::Renew;
}

impl<T: Kind> Leases for T {
    fn kept(&self, key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        Kind::kept(self, key_expire)
    }
    fn lease_end(&self, holder: &[u8], key_expire: Option<i64>) -> Option<i64> {
        Kind::lease_end(self, holder, key_expire)
    }
    fn renew(&self) -> keep::Renew {
        T::RENEW
    }
}

/// `f` on the value at `name` as its kind, with the key's expiry; None
/// when the key holds no kind's value.
fn leases<R>(
    ctx: &Context,
    name: &RedisString,
    f: impl FnOnce(&dyn Leases, Option<i64>) -> R,
) -> Option<R> {
    let mut key = Key::read(ctx, name);
    let expire = key.expire_at();
    macro_rules! find {
        ($($t:ty),*) => {
            $( if let Ok(Some(v)) = key.value::<$t>() {
                return Some(f(v, expire));
            } )*
        };
    }
    with_kinds!(find);
    None
}

/// Each lease at `name` held far away (`core::keep::KEPT_BASE`) with no
/// binding here gets its ttl from `now`, written and sent as a real
/// deadline: what a promoted replica, a restart or a key's new home does
/// with a lease that was bound before (`keep::thaw`).
pub fn thaw(ctx: &Context, name: &RedisString, now: i64) {
    let Some((kept, renew)) = leases(ctx, name, |v, expire| (v.kept(expire), v.renew())) else {
        return;
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
    leases(ctx, name, |v, expire| v.lease_end(holder, expire)).flatten()
}
