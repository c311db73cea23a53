//! `KEEP`: leases the server keeps while the holder's connection lives.
//! The bookkeeping is `core::keep`. While a lease is bound, replicas and
//! the AOF hold it at a far deadline that carries its ttl (`bound::wire`),
//! and the master renews its real deadline locally from one timer
//! (`renew`), sending nothing: a bound lease costs no write anywhere else.
//! When the binding ends (the connection closed or went idle), the lease
//! gets a full ttl and that real deadline is sent. A server that starts
//! serving leases held far away with no binding (a promoted replica, a
//! restart from the AOF) gives each its ttl from then (`thaw`). Bindings
//! themselves are neither persisted nor replicated.

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

pub use bound::{wire, Announce, Renew, Wire};
pub use thaw::Thaw;

pub fn init(ctx: &Context, thaw: Thaw) {
    renew::init(ctx);
    thaw::init(ctx, thaw);
}

/// The connection a `KEEP` binds to; None without `KEEP`. A script has no
/// connection of its own that could close, so `KEEP` is refused there; so
/// is a ttl too short to keep at one write per `keep-min-interval-ms` (a
/// lease is renewed every ttl/3), rather than lost.
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

/// What a kind does to keep its leases.
#[derive(Clone, Copy)]
pub struct Kind {
    pub renew: Renew,
    pub announce: Announce,
}

/// Binds the holder's lease on `name` (in the selected database) to
/// `client`; the latest binding of a lease wins. Unless the lease was bound
/// with this ttl already (then the command's own effect went out far away),
/// replicas and the AOF are sent it far away now.
pub fn bind(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: u64,
    ttl_ms: i64,
    kind: Kind,
    fence: Option<u64>,
) {
    let lease = Lease::of(ctx, name, holder);
    let how = How {
        renew: kind.renew,
        announce: kind.announce,
        fence,
    };
    let (before, at) = BOUND.with(|b| {
        let mut b = b.borrow_mut();
        let before = b.binding(&lease).map(|x| x.ttl_ms);
        b.bind(lease, client, ttl_ms, now_ms(), how);
        (before, b.next_due())
    });
    if before != Some(ttl_ms) {
        // An error: the hold is gone again; nothing to send.
        let _ = (kind.announce)(ctx, name, holder);
    }
    if let Some(at) = at {
        renew::arm(at);
    }
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

/// This server was promoted: what it holds far away runs out one ttl from
/// now unless bound again.
pub fn promoted() {
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
