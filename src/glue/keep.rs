//! `KEEP`: leases the server renews itself while the holder's connection
//! lives. The bookkeeping is `core::keep`; this file binds leases for the
//! commands, renews what is due from one module timer (through the lease's
//! kind, as an effect like any other change), and drops a connection's
//! bindings when it closes. Bindings are neither persisted nor replicated:
//! after a restart or a failover, held leases run out unless bound again.

use std::cell::RefCell;
use std::os::raw::c_void;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use redis_module::{raw, Context, ContextFlags, RedisString};

use super::blocking;
use super::config;
use super::info::{self, bump};
use super::server::now_ms;
use crate::core::error::Error;
use crate::core::keep::Bindings;

/// Renews one holder's lease on a key to `ttl` from `now`, only while it
/// still holds the grant with `fence` (when given): `NOTHELD` otherwise.
pub type Renew = fn(&Context, &RedisString, &[u8], i64, Option<u64>, i64) -> Result<(), Error>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    db: i32,
    key: Box<[u8]>,
    holder: Box<[u8]>,
}

impl Lease {
    fn of(ctx: &Context, name: &RedisString, holder: &[u8]) -> Lease {
        Lease {
            db: blocking::selected_db(ctx),
            key: name.as_slice().into(),
            holder: holder.into(),
        }
    }
}

#[derive(Clone, Copy)]
pub struct How {
    renew: Renew,
    fence: Option<u64>,
}

/// Renewals per timer callback: a burst of due leases is spread over
/// several event-loop turns instead of stalling one.
const BATCH: usize = 1000;

thread_local! {
    static BOUND: RefCell<Bindings<Lease, How>> = RefCell::new(Bindings::default());
    /// The renewal timer.
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
    /// Connections that closed while the bindings were borrowed: their
    /// bindings end at the next timer, before anything is renewed (a dead
    /// connection's leases must never be kept).
    static CLOSED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

pub fn init(ctx: &Context) {
    TIMER.with(|t| t.init(ctx, fire));
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_CLIENT_CHANGE, on_client_change);
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

/// Binds the holder's lease on `name` (in the selected database) to
/// `client`; the latest binding of a lease wins.
pub fn bind(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: u64,
    ttl_ms: i64,
    renew: Renew,
    fence: Option<u64>,
) {
    let now = now_ms();
    let lease = Lease::of(ctx, name, holder);
    let at = BOUND.with(|b| {
        let mut b = b.borrow_mut();
        b.bind(lease, client, ttl_ms, now, How { renew, fence });
        b.next_due()
    });
    if let Some(at) = at {
        arm(at);
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
    BOUND.with(|b| b.borrow_mut().clear());
}

fn arm(at: i64) {
    TIMER.with(|t| t.arm(at));
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    super::guard::call((), || {
        renew_due(&ctx);
        super::waiting::serve_ready(&ctx);
    });
}

/// Renews what is due (at most `BATCH`), then re-arms for the next.
fn renew_due(ctx: &Context) {
    let now = now_ms();
    let closed = CLOSED.with(|c| c.try_borrow_mut().map(|mut c| std::mem::take(&mut *c)));
    if let Ok(closed) = closed {
        BOUND.with(|b| {
            let mut b = b.borrow_mut();
            for id in closed {
                b.drop_client(id);
            }
        });
    }
    if !blocking::is_master(ctx) {
        return;
    }
    let due = BOUND.with(|b| b.borrow().due(now, BATCH));
    if !blocking::may_write(ctx) {
        // Paused or loading: the leases have two thirds of their ttl left.
        BOUND.with(|b| {
            let mut b = b.borrow_mut();
            for id in due {
                b.postpone(id, now + blocking::PAUSED_POLL_MS);
            }
        });
    } else {
        for id in due {
            // The lease shared, not copied: a renewal allocates nothing of
            // its own beyond the key's name.
            let Some((lease, ttl, how, client)) = BOUND.with(|b| {
                let b = b.borrow();
                b.get(id)
                    .map(|(l, x)| (Rc::clone(l), x.ttl_ms, x.payload, x.client))
            }) else {
                continue;
            };
            let max_idle = config::KEEP_MAX_IDLE_MS.load(Ordering::Relaxed);
            if max_idle > 0 && idle_ms(ctx, client) >= max_idle {
                // A connection silent that long may be half-open (a network
                // cut): its lease is left to run out.
                bump(&info::KEEP_LOST);
                BOUND.with(|b| b.borrow_mut().remove(id));
                continue;
            }
            let done = blocking::in_db(ctx, lease.db, || {
                let name = RedisString::create_from_slice(ctx.ctx, &lease.key);
                (how.renew)(ctx, &name, &lease.holder, ttl, how.fence, now)
            });
            BOUND.with(|b| match done {
                Ok(()) => {
                    bump(&info::KEEP_RENEWALS);
                    b.borrow_mut().renewed(id, now);
                }
                Err(_) => {
                    // The hold is gone (released elsewhere, deleted, ran
                    // out while writes were paused): nothing to renew.
                    bump(&info::KEEP_LOST);
                    b.borrow_mut().remove(id);
                }
            });
        }
    }
    if let Some(at) = BOUND.with(|b| b.borrow().next_due()) {
        arm(at.max(now));
    }
}

/// How long `client` has surely sent nothing: `CLIENT LIST`'s `idle` is in
/// whole seconds of the server's second clock, so a connection that talked
/// a millisecond ago can show 1; one second less is a lower bound. 0 when
/// unknown.
fn idle_ms(ctx: &Context, client: u64) -> i64 {
    let id = client.to_string();
    let line = match ctx.call("CLIENT", &["LIST", "ID", id.as_str()][..]) {
        Ok(redis_module::RedisValue::SimpleString(s)) => s,
        Ok(redis_module::RedisValue::BulkString(s)) => s,
        Ok(redis_module::RedisValue::StringBuffer(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => return 0,
    };
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("idle="))
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(0, |s| (s - 1).max(0).saturating_mul(1000))
}

unsafe extern "C" fn on_client_change(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED {
        return;
    }
    // SAFETY: for this event Redis passes a live RedisModuleClientInfo.
    let Some(info) = (unsafe { (data as *const raw::RedisModuleClientInfo).as_ref() }) else {
        return;
    };
    super::guard::call((), || {
        let dropped = BOUND.with(|b| match b.try_borrow_mut() {
            Ok(mut b) => {
                b.drop_client(info.id);
                true
            }
            Err(_) => false,
        });
        if !dropped {
            CLOSED.with(|c| {
                if let Ok(mut c) = c.try_borrow_mut() {
                    c.push(info.id);
                }
            });
            arm(now_ms());
        }
    });
}
