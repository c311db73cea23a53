//! The hand-off: when a key may have become free (a release, a lease that
//! ran out, a DEL, a flush), the head of its queue is granted inside that
//! same event, before any other command runs, so no newcomer can barge in.
//! And while a key has waiters, the timer is kept on the moment its lease
//! may free it.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;

use redis_module::Context;

use super::super::blocking::{self, Reply};
use super::super::config;
use super::super::info;
use super::super::key::Key;
use super::super::server::now_ms;
use super::clients;
use super::recover::Undo;
use super::state::{self, KeyId};
use super::timer;
use crate::core::queue::WaiterId;
use crate::core::waiters::Entry;

thread_local! {
    /// Set while `serve` grants: a grant's own commit step only notes the
    /// keys it wrote, and `serve` looks at them when it is done.
    static SERVING: Cell<bool> = const { Cell::new(false) };
    static TOUCHED: RefCell<Vec<KeyId>> = const { RefCell::new(Vec::new()) };
    /// Set while a command changes many keys (`batch`): the keys it wrote,
    /// served once each when it is done, not after every single write.
    static BATCH: RefCell<Option<Vec<KeyId>>> = const { RefCell::new(None) };
    /// Waiters whose grant was refused in this serving pass: the other keys
    /// they wait on need not ask them again.
    static TRIED: RefCell<HashSet<WaiterId>> = RefCell::new(HashSet::new());
}

/// Inside `serve`: notes a key a grant wrote. False outside.
pub fn note_touched(key: &KeyId) -> bool {
    if !SERVING.get() {
        return false;
    }
    TOUCHED.with(|t| t.borrow_mut().push(key.clone()));
    true
}

/// Inside `batch`: notes a key written. False outside.
pub fn note_batched(key: &KeyId) -> bool {
    BATCH.with(|b| match &mut *b.borrow_mut() {
        Some(keys) => {
            keys.push(key.clone());
            true
        }
        None => false,
    })
}

/// Runs `f`, a change of many keys, serving their waiters once when it is
/// done: a waiter that needs all of them is then asked once, not once per
/// key written.
pub fn batch<R>(ctx: &Context, f: impl FnOnce() -> R) -> R {
    if SERVING.get() || BATCH.with(|b| b.borrow().is_some()) {
        return f();
    }
    BATCH.with(|b| *b.borrow_mut() = Some(Vec::new()));
    let result = f();
    let mut keys = BATCH.with(|b| b.borrow_mut().take()).unwrap_or_default();
    let mut seen = HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    for key in &keys {
        if state::with(|s| s.waiters.has_waiters(key)) {
            serve_pass(ctx, key);
        }
    }
    TRIED.with(|t| t.borrow_mut().clear());
    result
}

/// Wakes, with nil, every waiter whose BLOCK timeout has come.
pub fn time_out(now: i64) {
    let due = state::with(|s| s.waiters.timed_out(now));
    dismiss(due, &Reply::Nil, &info::TIMEOUTS);
}

/// Answers every waiter on `key` with `reply`, ungranted: its slot is no
/// longer this node's to grant.
pub fn turn_away(key: &KeyId, reply: &Reply) {
    let mut ids = Vec::new();
    state::with(|s| {
        while let Some(id) = s.waiters.head(key) {
            ids.extend(s.waiters.take(id).map(|taken| (id, taken)));
        }
    });
    wake_all(ids, reply, &info::TURNED_AWAY);
}

/// Answers every waiter with `reply`, ungranted (this node stopped being a
/// master: like Redis' own blocked clients, they are told at once).
pub fn turn_away_all(reply: &Reply) {
    let ids = state::with(|s| s.waiters.ids());
    dismiss(ids, reply, &info::TURNED_AWAY);
}

fn dismiss(ids: Vec<WaiterId>, reply: &Reply, counter: &AtomicU64) {
    let taken = state::with(|s| {
        ids.into_iter()
            .filter_map(|id| Some((id, s.waiters.take(id)?)))
            .collect()
    });
    wake_all(taken, reply, counter);
}

type Taken = (WaiterId, (Vec<KeyId>, Entry<state::Waiter>));

fn wake_all(taken: Vec<Taken>, reply: &Reply, counter: &AtomicU64) {
    state::with(|s| {
        for (id, (_, e)) in &taken {
            s.graph.remove_blocked(&e.payload.holder, *id);
        }
    });
    for (_, (keys, e)) in taken {
        info::bump(counter);
        clients::wake(e.payload.handle, reply.clone(), None);
        timer::note(keys.into_iter().map(|k| k.name));
    }
}

/// Grants the head of `key`'s queue while it can be granted (a semaphore
/// may serve several waiters in a row), then re-times the keys touched.
pub fn serve(ctx: &Context, key: &KeyId) {
    serve_pass(ctx, key);
    if BATCH.with(|b| b.borrow().is_none()) {
        TRIED.with(|t| t.borrow_mut().clear());
    }
}

fn serve_pass(ctx: &Context, key: &KeyId) {
    if !blocking::is_master(ctx) {
        return;
    }
    if !blocking::may_write(ctx) {
        // Paused or loading: look again when writes are allowed.
        timer::note([key.name.clone()]);
        return;
    }
    SERVING.set(true);
    grant_heads(ctx, key);
    SERVING.set(false);
    let touched = TOUCHED.with(|t| std::mem::take(&mut *t.borrow_mut()));
    refresh(ctx, key);
    for k in touched.iter().filter(|k| *k != key) {
        refresh(ctx, k);
    }
}

fn grant_heads(ctx: &Context, key: &KeyId) {
    // A head refused earlier in this pass is not asked again (and not even
    // checked for being first everywhere, which costs a lookup per key it
    // waits on).
    while let Some(id) = state::with(|s| s.waiters.head(key))
        .filter(|id| !TRIED.with(|t| t.borrow().contains(id)))
        .filter(|id| state::with(|s| s.waiters.ready(*id)))
    {
        if state::with(|s| s.waiters.get(id).and_then(|(_, e)| e.timeout_at))
            .is_some_and(|t| t <= now_ms())
        {
            // Its time ran out first: nil, and on to the next in line.
            time_out(now_ms());
            continue;
        }
        // The waiter stays queued while its kind decides (no borrow of the
        // state across that call); it is taken out only once granted.
        let Some((keys, holder, db, want)) = state::with(|s| {
            let (keys, e) = s.waiters.get(id)?;
            let w = &e.payload;
            Some((keys.clone(), w.holder.clone(), w.db, w.want.clone()))
        }) else {
            break;
        };
        let outcome = blocking::in_db(ctx, db, || {
            let names: Vec<_> = keys.iter().map(|k| k.name(ctx)).collect();
            want.try_grant(ctx, &names, &holder, now_ms())
        });
        let (reply, take_back) = match outcome {
            Ok(Some(g)) => (g.reply, Some(g.take_back)),
            Ok(None) => {
                TRIED.with(|t| t.borrow_mut().insert(id));
                break;
            }
            Err(crate::core::error::Error::TryAgain) => {
                // The restart grace is running: serve when it ends.
                if let Some(end) = config::grace_ends(want.ttl_ms()) {
                    timer::arm(end);
                }
                break;
            }
            Err(e) => (Reply::Error(e.message()), None),
        };
        let Some((keys, e)) = state::with(|s| {
            let taken = s.waiters.take(id)?;
            s.graph.remove_blocked(&taken.1.payload.holder, id);
            Some(taken)
        }) else {
            break;
        };
        info::bump(&info::HANDOFFS);
        TOUCHED.with(|t| t.borrow_mut().extend(keys.iter().cloned()));
        let undo = take_back.map(|take_back| Undo {
            db,
            keys: keys.into_iter().map(|k| k.name).collect(),
            holder,
            take_back,
        });
        clients::wake(e.payload.handle, reply, undo);
    }
}

/// Keeps the timer on when `key` may next free itself (its lease end, or
/// a semaphore's earliest holder lease end), while it has waiters.
pub fn refresh(ctx: &Context, key: &KeyId) {
    if !state::with(|s| s.waiters.has_waiters(key)) {
        state::with(|s| s.waiters.watch(key, None));
        return;
    }
    let at = blocking::in_db(ctx, key.db, || {
        let name = key.name(ctx);
        let k = Key::read(ctx, &name);
        let expire = k.expire_at();
        k.stored().ok().flatten().and_then(|v| v.frees_at(expire))
    });
    // Redis counts a key as expired only once the clock is past its
    // deadline: fire 1 ms after it. While the restart grace holds the head
    // of the queue back, try again when it ends.
    let now = now_ms();
    let head_ttl = state::with(|s| {
        let id = s.waiters.head(key)?;
        s.waiters.get(id).map(|(_, e)| e.payload.want.ttl_ms())
    });
    let grace = head_ttl
        .and_then(config::grace_ends)
        .filter(|end| *end > now);
    let at = at.map(|t| t + 1).into_iter().chain(grace).min();
    state::with(|s| s.waiters.watch(key, at));
    if let Some(t) = at {
        timer::arm(t);
    }
}
