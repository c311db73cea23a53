//! Waiting without polling: blocked clients in per-key FIFO queues under
//! one arrival order, the wait-for graph, and the hand-off. The engine is
//! kind-blind: a waiter carries its request as a `Want` its kind
//! implements, and keys are read through `types::Stored` (who holds them,
//! when they free themselves).
//!
//! Leases are Redis expiries, which Redis applies lazily; so while a key has
//! waiters, the one module timer is armed for the moment it may free itself.
//! Removals by other hands (DEL, UNLINK, eviction, active expiry, FLUSH*)
//! arrive in callbacks that may not write, so they only note the key and
//! arm the timer at once.
//!
//! Files: `state` (what is kept, and the borrow rule), `timer`, `clients`
//! (blocked-client callbacks), `handoff`, `recover` (lost grants),
//! `deadlock`, `enqueue` (a request joining its queues), `moving` (mailbox
//! waits while their slot moves away). This file is the
//! engine's face to the rest of the glue.

mod clients;
mod deadlock;
mod enqueue;
mod handoff;
mod mailed;
mod moving;
mod recover;
mod slots;
mod state;

use crate::core::hash::Set;
use std::os::raw::c_void;
use std::rc::Rc;

use redis_module::{raw, Context, RedisString, RedisValue};

use super::blocking::{self, Reply};
use super::mailbox;
use super::requests;
use super::server::now_ms;
use super::timer;

pub use moving::began as slots_leaving;
pub use state::{Attempt, Granted, KeyId, Seen, TakeBack, Try, Want};

pub fn init(ctx: &Context) {
    timer::init(ctx, fire);
}

pub fn has_waiters(ctx: &Context, name: &RedisString) -> bool {
    if state::nobody_waits() {
        return false;
    }
    let key = KeyId::of(ctx, name);
    // While busy, the key counts as queued: no newcomer barges in.
    state::peek(|s| s.waiters.has_waiters(&key)).unwrap_or(true)
}

/// Waiters queued on a key (for the `*.INFO` commands).
pub fn waiters(ctx: &Context, name: &RedisString) -> i64 {
    if state::nobody_waits() {
        return 0;
    }
    let key = KeyId::of(ctx, name);
    state::peek(|s| s.waiters.len(&key) as i64).unwrap_or(-1)
}

/// Most waiters `*.INFO`'s `queue` lists.
const QUEUE_SHOWN: usize = 100;

/// `*.INFO`'s `queue`: the key's waiters in serving order, `[holder,
/// waited-ms]` and the request's detail, at most the first 100.
pub fn queue(ctx: &Context, name: &RedisString) -> RedisValue {
    if state::nobody_waits() {
        return RedisValue::Array(vec![]);
    }
    let key = KeyId::of(ctx, name);
    let now = now_ms();
    let rows = state::peek(|s| {
        s.waiters
            .queue(&key)
            .take(QUEUE_SHOWN)
            .map(|(_, e)| {
                let w = &e.payload;
                let mut row = vec![
                    RedisValue::StringBuffer(w.holder.clone()),
                    RedisValue::Integer((now - w.since).max(0)),
                ];
                row.extend(w.want.detail());
                RedisValue::Array(row)
            })
            .collect()
    });
    RedisValue::Array(rows.unwrap_or_default())
}

/// A key with waiters, for `LOCK.TOP`: how many wait, and since when the
/// longest-waiting one has (unix ms).
pub struct Hot {
    pub key: KeyId,
    pub kind: &'static str,
    pub waiters: usize,
    pub oldest_since: i64,
}

/// Every key with waiters (the oldest wait read from the first in line and
/// the first that arrived in order: a waiter that jumped the queue is the
/// only kind that is first without being oldest). O(keys with waiters).
pub fn hot_keys() -> Vec<Hot> {
    if state::nobody_waits() {
        return vec![];
    }
    state::peek(|s| {
        s.waiters
            .keys()
            .map(|(k, n)| {
                let head = s.waiters.queue(k).next().map(|(_, e)| &e.payload);
                let first = head.map(|w| w.since);
                let in_order = s
                    .waiters
                    .queue(k)
                    .find(|(id, _)| *id >= crate::core::queue::FRONT)
                    .map(|(_, e)| e.payload.since);
                Hot {
                    key: k.clone(),
                    kind: head.map_or("lock", |w| w.want.kind().short),
                    waiters: n,
                    oldest_since: first.into_iter().chain(in_order).min().unwrap_or(i64::MAX),
                }
            })
            .collect()
    })
    .unwrap_or_default()
}

/// (blocked clients, mailbox waiters, live wait edges) for `INFO`; None
/// while busy.
pub fn gauges() -> Option<(i64, i64, (i64, i64))> {
    let now = now_ms();
    state::peek(|s| {
        let (declared, blocked) = s.graph.counts(now);
        let mailed = s.mailbox_waiters() as i64;
        (
            s.waiters.waiting() as i64 - mailed,
            mailed,
            (declared as i64, blocked as i64),
        )
    })
}

/// The holder got the key: a declared wait for it is over.
pub fn acquired(ctx: &Context, holder: &[u8], name: &RedisString) {
    if state::no_edges() {
        return;
    }
    let key = KeyId::of(ctx, name);
    state::with(|s| s.graph.acquired(holder, &key));
}

/// After a write to a key: a key with waiters is ready, served (and its
/// timer moved to its new lease) at the end of the command or timer pass.
pub fn after_write(ctx: &Context, name: &RedisString) {
    if state::nobody_waits() || handoff::serving(ctx, name.as_slice()) {
        return;
    }
    let key = KeyId::of(ctx, name);
    if state::with(|s| s.waiters.has_waiters(&key)) {
        handoff::note_ready(key);
    }
}

/// The end of a command or a timer pass: the keys its writes made ready
/// are served, once each.
pub fn serve_ready(ctx: &Context) {
    handoff::serve_ready(ctx);
}

pub use deadlock::{graph, top, waitfor};
pub use enqueue::{take_place, wait};
pub use mailed::{cancel, client_gone};
pub use slots::may_touch;

/// A key's expiry was moved by hand (`PEXPIRE`, `EXPIREAT`, ...): re-time
/// its waiters at the next timer.
pub fn expiry_changed(name: &[u8]) {
    timer::note_removed(name)
}

/// `FLUSHDB` (`db`) or `FLUSHALL` (-1) freed every lock without per-key
/// callbacks: its waiters are served at the next timer, and the waits
/// declared on its keys end now.
pub fn flushed(db: i32) {
    clients::guarded(|| {
        requests::flushed((db != -1).then_some(db));
        if !state::no_edges() {
            state::try_with(|s| s.graph.retain_declared(|k| db != -1 && k.db != db));
        }
        if !state::nobody_waits() {
            timer::note_all();
        }
    });
}

/// Slots moved or were trimmed (atomic slot migration): every waiter is
/// looked at again at the next timer, and those whose slot this node no
/// longer serves are answered as a new command would be.
pub fn slots_changed() {
    if !state::nobody_waits() {
        timer::note_all();
    }
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    clients::guarded(|| on_timer(&Context::new(ctx)));
}

/// Redis' own words to a blocked client when its master turns replica.
const UNBLOCKED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// This master became a replica: its waiters are answered at the next
/// timer (not from the role-change event, which may come mid-command).
pub fn demoted() {
    if !state::nobody_waits() {
        timer::arm(now_ms());
    }
}

fn on_timer(ctx: &Context) {
    timer::fired();
    let now = now_ms();
    mailed::settle();
    // Posts for timed-out mailbox waiters wait in the outbox while
    // padlock may not write.
    handoff::time_out(ctx, now);
    if !blocking::is_master(ctx) {
        // Demoted: like Redis' own blocked clients, waiters are told now
        // (a replica posts to no mailbox: its master's are its own).
        handoff::turn_away_all(&Reply::Error(UNBLOCKED.to_owned()));
        mailbox::forget_all();
        return;
    }
    if !blocking::may_write(ctx) {
        // Paused or loading: hand-offs, posts and take-backs wait
        // (nothing is lost: noted keys, due leases, lost grants and posts
        // stay noted).
        if !state::nobody_waits() || recover::any_lost() || mailbox::any_later() {
            timer::arm(now + blocking::PAUSED_POLL_MS);
        }
        return;
    }
    mailbox::flush(ctx);
    recover::take_back(ctx);
    let pending = timer::take_pending();
    let names: Set<Rc<[u8]>> = pending.names.into_iter().collect();
    let due = state::with(|s| {
        if pending.all {
            return s.waiters.all_keys();
        }
        let noted = names.iter().flat_map(|name| {
            s.dbs.iter().map(|&db| KeyId {
                db,
                name: Rc::clone(name),
            })
        });
        s.waiters.due_keys(now, noted)
    });
    let mut slots = slots::Slots::default();
    for key in due {
        match slots.redirect(ctx, &key) {
            Some(to) => handoff::turn_away(ctx, &key, &Reply::Error(to)),
            None => handoff::note_ready(key),
        }
    }
    handoff::serve_ready(ctx);
    if let Some(at) = state::with(|s| s.waiters.next_event()) {
        timer::arm(at);
    }
}
