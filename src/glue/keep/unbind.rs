//! The `KEEP` timer. A bound lease needs no renewal; the timer only ends
//! bindings: those of connections that closed, and (with
//! `keep-max-idle-ms`) of connections silent that long. Each such lease
//! gets a full ttl from then, written and sent with its real deadline, so
//! that it runs out everywhere as docs/commands.md says.

use std::cell::RefCell;
use std::os::raw::c_void;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use redis_module::{raw, Context, RedisString};

use super::bound::{How, Lease, BOUND};
use crate::core::keep::idle::IdleSchedule;
use crate::glue::blocking;
use crate::glue::config;
use crate::glue::info::{self, bump};
use crate::glue::key::Key;
use crate::glue::server::now_ms;

/// How often the timer looks for silent connections while leases are
/// bound (and whether `keep-max-idle-ms` was turned on meanwhile).
const IDLE_CHECK_MS: i64 = 250;

/// Leases written again per timer firing after their bindings ended.
const RENEW_BATCH: usize = 1000;

/// A lease whose binding ended: it runs out one ttl from when that is
/// handled. `client_expiry`: a client set the key's expiry by hand, which
/// the key keeps.
struct Ended {
    lease: Rc<Lease>,
    ttl: i64,
    how: How,
    client_expiry: bool,
}

thread_local! {
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
    /// Connections that closed; their bindings end at the next timer.
    static CLOSED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Ended bindings whose real deadline is still to be written (writes
    /// may be paused when they end).
    static ENDED: RefCell<Vec<Ended>> = const { RefCell::new(Vec::new()) };
    /// When each bound connection is next looked at for `keep-max-idle-ms`.
    static IDLE: RefCell<IdleSchedule> = RefCell::new(IdleSchedule::default());
}

pub fn init(ctx: &Context) {
    TIMER.with(|t| t.init(ctx, fire));
}

pub fn arm(at: i64) {
    TIMER.with(|t| t.arm(at));
}

/// A lease was bound to `client`: the idle check runs while any is, and
/// looks at that connection when it may first have gone silent.
pub fn bound_one(client: u64) {
    let now = now_ms();
    let max_idle = config::KEEP_MAX_IDLE_MS.load(Ordering::Relaxed);
    IDLE.with(|s| s.borrow_mut().watch(client, now, max_idle));
    arm(now + IDLE_CHECK_MS);
}

/// This server became a replica: nothing is kept or written any more.
pub fn clear() {
    BOUND.with(|b| b.borrow_mut().clear());
    IDLE.with(|s| *s.borrow_mut() = IdleSchedule::default());
    ENDED.with(|e| e.borrow_mut().clear());
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || {
        end_bindings(&ctx);
        crate::glue::waiting::serve_ready(&ctx);
    });
}

fn end_clients(clients: impl IntoIterator<Item = u64>) -> usize {
    let ended: Vec<Ended> = BOUND.with(|b| {
        let mut b = b.borrow_mut();
        clients
            .into_iter()
            .flat_map(|id| b.drop_client(id))
            .map(|(lease, x)| Ended {
                lease,
                ttl: x.ttl_ms,
                how: x.payload,
                client_expiry: false,
            })
            .collect()
    });
    let n = ended.len();
    for e in &ended {
        note_unbound(e);
    }
    ENDED.with(|e| e.borrow_mut().extend(ended));
    n
}

/// A binding with a mailbox ended while its hold stays: the hold's loss is
/// told should its key go before it is bound again.
fn note_unbound(e: &Ended) {
    if let Some(m) = &e.how.mail {
        let key = (e.lease.db, e.lease.key.clone());
        super::lost::unbound(key, &e.lease.holder, m.clone());
    }
}

/// Bindings a client's own `PEXPIRE`/`PERSIST` ended (see
/// `keep::expiry_set`; `client_expiry`, kept), or a key's leaving the node
/// did: each lease gets its ttl at the next timer.
pub fn ended_by(ended: Vec<(Rc<Lease>, i64, How)>, client_expiry: bool) {
    let ended: Vec<Ended> = ended
        .into_iter()
        .map(|(lease, ttl, how)| Ended {
            lease,
            ttl,
            how,
            client_expiry,
        })
        .collect();
    for e in &ended {
        note_unbound(e);
    }
    ENDED.with(|e| e.borrow_mut().extend(ended));
    arm(now_ms());
}

fn end_bindings(ctx: &Context) {
    super::settle();
    let now = now_ms();
    if let Ok(closed) = CLOSED.with(|c| c.try_borrow_mut().map(|mut c| std::mem::take(&mut *c))) {
        end_clients(closed);
    }
    if !blocking::is_master(ctx) {
        return clear();
    }
    if !blocking::may_write(ctx) {
        return arm(now + blocking::PAUSED_POLL_MS);
    }
    let max_idle = config::KEEP_MAX_IDLE_MS.load(Ordering::Relaxed);
    let due = IDLE.with(|s| {
        let mut s = s.borrow_mut();
        BOUND.with(|b| s.follow(max_idle, b.borrow().clients(), now));
        s.take_due(now)
    });
    if !due.is_empty() {
        // A connection silent that long may be half-open (a network cut).
        let mut silent = vec![];
        for c in due {
            if !BOUND.with(|b| b.borrow().has_client(c)) {
                continue;
            }
            let idle = idle_ms(ctx, c);
            if idle >= max_idle {
                silent.push(c);
            } else {
                IDLE.with(|s| s.borrow_mut().again(c, idle, now));
            }
        }
        let lost = end_clients(silent);
        info::KEEP_LOST.fetch_add(lost as u64, Ordering::Relaxed);
    }
    // A bounded batch per firing, the rest at the next (a connection that
    // closes with many bound leases must not stall everyone else while
    // they are written; each is far away until then).
    let (ended, more) = ENDED.with(|e| {
        let mut e = e.borrow_mut();
        let n = e.len().min(RENEW_BATCH);
        let batch: Vec<Ended> = e.drain(..n).collect();
        (batch, !e.is_empty())
    });
    if more {
        arm(now);
    }
    for e in ended {
        // A full ttl from now, written with its real deadline (an error:
        // the hold is gone already).
        let done = blocking::in_db(ctx, e.lease.db, || {
            let name = RedisString::create_from_slice(ctx.ctx, &e.lease.key);
            let before = e.client_expiry.then(|| Key::read(ctx, &name).expire_at());
            let done = (e.how.renew)(ctx, &name, &e.lease.holder, e.ttl, e.how.fence, now);
            if let (Some(at), true) = (before, done.is_ok()) {
                keep_expiry(ctx, &name, at);
            }
            done
        });
        if done.is_ok() {
            bump(&info::KEEP_RENEWALS);
            if e.how.mail.is_some() {
                // Its loss is told when that ttl runs out (a key that
                // stays, a semaphore's, tells no one by going).
                super::lost::due(
                    (e.lease.db, e.lease.key.clone()),
                    &e.lease.holder,
                    now + e.ttl,
                );
            }
        }
    }
    if BOUND.with(|b| !b.borrow().is_empty()) {
        arm(now + IDLE_CHECK_MS);
    }
}

/// Sets the key's expiry back to what a client set (`at`; None: none),
/// here and on replicas and in the AOF.
fn keep_expiry(ctx: &Context, name: &RedisString, at: Option<i64>) {
    let mut key = Key::write(ctx, name);
    if key.expire_at() == at {
        return;
    }
    key.set_expire_at(at.unwrap_or(-1));
    drop(key);
    match at {
        Some(t) => {
            let t = RedisString::create_from_slice(ctx.ctx, t.to_string().as_bytes());
            ctx.replicate("PEXPIREAT", &[name, &t][..]);
        }
        None => ctx.replicate("PERSIST", &[name][..]),
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

/// A connection closed: its bindings end at the next timer.
pub fn closed(client: u64) {
    if BOUND.with(|b| b.try_borrow().is_ok_and(|b| b.is_empty())) {
        return;
    }
    CLOSED.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.push(client);
        }
    });
    arm(now_ms());
}
