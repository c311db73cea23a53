//! `KEEP`: leases the server keeps while the holder's connection lives.
//! The bookkeeping is `core::keep`. A bound lease is written once, at a far
//! deadline that carries its ttl (`bound::held_at`), on the master and so
//! on its replicas and in its files: it costs nothing while bound, and a
//! copy anywhere is right if the master dies now. When the binding ends
//! (the connection closed or went silent: `renew`), the lease gets a full
//! ttl, written and sent with its real deadline. A server that serves
//! leases held far away with no binding (a promoted replica, a restart, a
//! slot's new owner, a key renamed or copied) gives each its ttl from then
//! (`thaw`). Bindings themselves are neither persisted nor replicated.

mod bound;
mod renew;
mod thaw;

use std::sync::atomic::Ordering;

use redis_module::{Context, ContextFlags, RedisString};

use super::config;
use super::server::now_ms;
use crate::core::error::Error;
use crate::core::keep::kept_ttl;
use bound::{How, Lease, BOUND};

pub use bound::{held_at, Renew};
pub use thaw::Thaw;

pub fn init(ctx: &Context, thaw: Thaw) {
    renew::init(ctx);
    thaw::init(ctx, thaw);
}

/// The connection a `KEEP` binds to; None without `KEEP`. A script has no
/// connection of its own that could close, so `KEEP` is refused there; so
/// is a ttl below 3 x `keep-min-interval-ms` (the SPEC's floor), rather
/// than lost.
pub fn client(ctx: &Context, keep: bool, ttl_ms: i64) -> Result<Option<u64>, Error> {
    if !keep {
        return Ok(None);
    }
    // SAFETY: live context.
    let id = unsafe { rm!(RedisModule_GetClientId)(ctx.ctx) };
    if id == 0 || ctx.get_flags().contains(ContextFlags::LUA) {
        return Err(Error::Invalid(
            "KEEP needs a client connection, not a script",
        ));
    }
    let min = 3 * config::KEEP_MIN_INTERVAL_MS.load(Ordering::Relaxed);
    if ttl_ms < min {
        return Err(Error::KeepTooShort { min });
    }
    Ok(Some(id))
}

/// Binds the holder's lease on `name` (in the selected database) to
/// `client`; the latest binding of a lease wins. Unless it was bound with
/// this ttl already (the command then wrote it far away), the lease is
/// written far away now.
pub fn bind(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: u64,
    ttl_ms: i64,
    renew: Renew,
    fence: Option<u64>,
) {
    let lease = Lease::of(ctx, name, holder);
    let before = BOUND.with(|b| {
        b.borrow_mut()
            .bind(lease, client, ttl_ms, How { renew, fence })
    });
    if before.map(|b| b.ttl_ms) != Some(ttl_ms) {
        // An error: the hold is gone again; nothing to write.
        if renew(ctx, name, holder, ttl_ms, fence, now_ms()).is_ok() {
            super::info::bump(&super::info::KEEP_RENEWALS);
        }
    }
    renew::bound_one();
}

/// The holder's last hold on `name` is gone: its binding ends.
pub fn unbind(ctx: &Context, name: &RedisString, holder: &[u8]) {
    if BOUND.with(|b| b.borrow().is_empty()) {
        return;
    }
    let lease = Lease::of(ctx, name, holder);
    BOUND.with(|b| b.borrow_mut().unbind(&lease));
}

pub fn is_bound(ctx: &Context, name: &RedisString, holder: &[u8]) -> bool {
    if BOUND.with(|b| b.borrow().is_empty()) {
        return false;
    }
    let lease = Lease::of(ctx, name, holder);
    BOUND.with(|b| b.borrow().is_bound(&lease))
}

/// Bound leases (for `INFO`); -1 while busy.
pub fn bound() -> i64 {
    BOUND.with(|b| b.try_borrow().map_or(-1, |b| b.len() as i64))
}

/// This server became a replica: it renews nothing any more.
pub fn clear() {
    renew::clear();
}

/// This server was promoted (or `SWAPDB` moved keys away from their
/// bindings): what it holds far away with no binding runs out one ttl from
/// now unless bound again.
pub fn thaw_all() {
    thaw::start();
}

/// A far deadline reached `name` on this server while it is a master and
/// not loading: it came from another master (an atomic slot migration),
/// and no binding here keeps it, so it is thawed (once the slot is this
/// node's to touch).
pub fn arrived(ctx: &Context, name: &[u8], deadline_ms: i64) {
    let flags = ctx.get_flags();
    if kept_ttl(deadline_ms).is_some()
        && flags.contains(ContextFlags::MASTER)
        && !flags.contains(ContextFlags::LOADING)
    {
        thaw::note(super::blocking::selected_db(ctx), name);
    }
}

/// Slots moved (atomic slot migration).
pub fn slots_changed() {
    thaw::slots_changed();
}

/// A key reached `name` from elsewhere on this master (`RENAME`, `MOVE`,
/// `COPY`, `RESTORE`): a lease it holds far away has no binding here.
pub fn moved_in(ctx: &Context, name: &[u8]) {
    if super::blocking::may_write(ctx) {
        thaw::note(super::blocking::selected_db(ctx), name);
    }
}
