//! The `KEEP` timer: renews what is due locally (replicas and the AOF hold
//! bound leases far away, so a renewal sends nothing), and sends a real
//! deadline for every lease whose binding ended (its connection closed or
//! went idle), so that replicas and the AOF run it out as the master does.
//! Once a copy of the data is forked off (a save, an AOF rewrite, a
//! replica's full sync) and once a replica came online, it sends every
//! bound lease again: such a copy holds only the master's real deadlines.

use std::cell::{Cell, RefCell};
use std::os::raw::c_void;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use redis_module::{raw, Context, RedisString};

use super::bound::{quietly, How, Lease, BOUND};
use crate::glue::blocking;
use crate::glue::config;
use crate::glue::info::{self, bump};
use crate::glue::server::now_ms;

/// Renewals per timer callback: a burst of due leases is spread over
/// several event-loop turns instead of stalling one.
const BATCH: usize = 1000;

/// A lease whose binding ended: it runs out one ttl from when that is
/// handled, on the master and (sent then) everywhere else.
type Ended = (Rc<Lease>, i64, How);

thread_local! {
    /// The renewal timer.
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
    /// Connections that closed; their bindings end at the next timer,
    /// before anything is renewed (a dead connection's leases are never
    /// kept).
    static CLOSED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Ended bindings whose real deadline is still to be sent (writes may
    /// be paused when they end).
    static ENDED: RefCell<Vec<Ended>> = const { RefCell::new(Vec::new()) };
    /// Every bound lease is to be sent again.
    static RESEND: Cell<bool> = const { Cell::new(false) };
}

pub fn init(ctx: &Context) {
    TIMER.with(|t| t.init(ctx, fire));
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_CLIENT_CHANGE, on_client_change);
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_REPLICA_CHANGE, on_copy_made);
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_FORK_CHILD, on_copy_made);
}

pub fn arm(at: i64) {
    TIMER.with(|t| t.arm(at));
}

/// This server became a replica: nothing is renewed or sent any more.
pub fn clear() {
    BOUND.with(|b| b.borrow_mut().clear());
    ENDED.with(|e| e.borrow_mut().clear());
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || {
        renew_due(&ctx);
        crate::glue::waiting::serve_ready(&ctx);
    });
}

fn run_in_db<R>(ctx: &Context, lease: &Lease, f: impl FnOnce(&RedisString) -> R) -> R {
    blocking::in_db(ctx, lease.db, || {
        f(&RedisString::create_from_slice(ctx.ctx, &lease.key))
    })
}

/// Renews what is due (at most `BATCH`), then re-arms for the next.
fn renew_due(ctx: &Context) {
    let now = now_ms();
    let closed = CLOSED.with(|c| c.try_borrow_mut().map(|mut c| std::mem::take(&mut *c)));
    if let Ok(closed) = closed {
        let ended: Vec<Ended> = BOUND.with(|b| {
            let mut b = b.borrow_mut();
            closed
                .into_iter()
                .flat_map(|id| b.drop_client(id))
                .map(|(lease, x)| (lease, x.ttl_ms, x.payload))
                .collect()
        });
        ENDED.with(|e| e.borrow_mut().extend(ended));
    }
    if !blocking::is_master(ctx) {
        return clear();
    }
    if !blocking::may_write(ctx) {
        // Paused or loading: the leases have two thirds of their ttl left.
        let due = BOUND.with(|b| b.borrow().due(now, BATCH));
        BOUND.with(|b| {
            let mut b = b.borrow_mut();
            for id in due {
                b.postpone(id, now + blocking::PAUSED_POLL_MS);
            }
        });
        arm(now + blocking::PAUSED_POLL_MS);
        return;
    }
    let ended = ENDED.with(|e| std::mem::take(&mut *e.borrow_mut()));
    for (lease, ttl, how) in ended {
        // A full ttl from now, sent with its real deadline (an error: the
        // hold is gone already, and so was sent).
        let _ = run_in_db(ctx, &lease, |name| {
            (how.renew)(ctx, name, &lease.holder, ttl, how.fence, now)
        });
    }
    if RESEND.replace(false) {
        let all: Vec<(Rc<Lease>, How)> = BOUND.with(|b| {
            b.borrow()
                .all()
                .map(|(l, x)| (Rc::clone(l), x.payload))
                .collect()
        });
        for (lease, how) in all {
            let _ = run_in_db(ctx, &lease, |name| (how.announce)(ctx, name, &lease.holder));
        }
    }
    let due = BOUND.with(|b| b.borrow().due(now, BATCH));
    for id in due {
        // The lease shared, not copied: a renewal allocates nothing of its
        // own beyond the key's name.
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
            // cut): its lease runs out one ttl from now, everywhere.
            bump(&info::KEEP_LOST);
            BOUND.with(|b| b.borrow_mut().remove(id));
            let _ = run_in_db(ctx, &lease, |name| {
                (how.renew)(ctx, name, &lease.holder, ttl, how.fence, now)
            });
            continue;
        }
        let done = run_in_db(ctx, &lease, |name| {
            quietly(|| (how.renew)(ctx, name, &lease.holder, ttl, how.fence, now))
        });
        BOUND.with(|b| match done {
            Ok(()) => {
                bump(&info::KEEP_RENEWALS);
                b.borrow_mut().renewed(id, now);
            }
            Err(_) => {
                // The hold is gone (released elsewhere, deleted, renamed,
                // ran out while writes were paused): nothing to renew.
                bump(&info::KEEP_LOST);
                b.borrow_mut().remove(id);
            }
        });
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
    crate::glue::guard::call((), || {
        if BOUND.with(|b| b.try_borrow().map_or(true, |b| b.is_empty())) {
            return;
        }
        CLOSED.with(|c| {
            if let Ok(mut c) = c.try_borrow_mut() {
                c.push(info.id);
            }
        });
        arm(now_ms());
    });
}

/// A child was forked (an RDB file for a save or a replica, an AOF
/// rewrite's base: each holds the master's real deadlines, and what is sent
/// from now on reaches the AOF's next part and the syncing replica), or a
/// replica came online: every bound lease is sent again, so that what they
/// hold is far away. (The persistence events fire in the child.)
unsafe extern "C" fn on_copy_made(
    _ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let made = (eid.id == raw::REDISMODULE_EVENT_REPLICA_CHANGE
        && subevent == raw::REDISMODULE_SUBEVENT_REPLICA_CHANGE_ONLINE)
        || (eid.id == raw::REDISMODULE_EVENT_FORK_CHILD
            && subevent == raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN);
    crate::glue::guard::call((), || {
        if made && BOUND.with(|b| b.try_borrow().is_ok_and(|b| !b.is_empty())) {
            RESEND.set(true);
            arm(now_ms());
        }
    });
}
