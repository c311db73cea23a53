//! Waiting without polling: the per-key FIFO queues of blocked clients,
//! the wait-for graph, and the hand-off. A grant always happens inside the
//! event that freed the key (a release, a lease that ran out, a DEL, a
//! flush), before any other command runs, so no newcomer can barge in.
//!
//! Leases are Redis expiries, which Redis applies lazily; so while a key has
//! waiters, a module timer is armed for the moment its lease (or, for a
//! semaphore, its earliest holder lease) ends. Removals by other hands (DEL,
//! UNLINK, eviction, active expiry, FLUSH*) arrive in callbacks that may not
//! write, so they only note the key and arm the timer at once.
//!
//! State is main-thread only. No borrow of it is held across a call into
//! Redis: a call may re-enter through the unlink callback, which therefore
//! touches only `PENDING` and the timer.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::{raw, Context, RedisString, RedisValue};

use super::blocking::{self, Handle, Reply};
use super::commands::{lock, sem};
use super::config;
use super::info;
use super::key::{Key, Kind};
use super::now_ms;
use crate::core::args::Arg;
use crate::core::error::Error;
use crate::core::queue::{Queues, WaiterId};
use crate::core::waitgraph::{Held, Node, WaitGraph};

/// A key in a database.
pub type KeyId = (i32, Vec<u8>);

/// What a waiter asked for.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    Lock {
        ttl_ms: i64,
    },
    Multi {
        ttl_ms: i64,
    },
    Sem {
        limit: u64,
        permits: u64,
        ttl_ms: i64,
    },
}

/// A grant to take back if its reply never reached the client.
pub struct Undo {
    db: i32,
    keys: Vec<Vec<u8>>,
    holder: Vec<u8>,
    what: Granted,
}

enum Granted {
    /// The fence handed out for each key.
    Locks(Vec<u64>),
    Permits(u64),
}

impl Want {
    fn ttl_ms(&self) -> i64 {
        match self {
            Want::Lock { ttl_ms } | Want::Multi { ttl_ms } | Want::Sem { ttl_ms, .. } => *ttl_ms,
        }
    }
}

struct Waiter {
    handle: Handle,
    holder: Vec<u8>,
    want: Want,
    db: i32,
    /// When `BLOCK timeout-ms` runs out; None waits forever.
    timeout_at: Option<i64>,
}

#[derive(Default)]
struct State {
    queues: Queues<KeyId, Waiter>,
    graph: WaitGraph<KeyId>,
    by_handle: HashMap<usize, WaiterId>,
    /// Keys with waiters -> when they may next free themselves.
    watch: HashMap<KeyId, i64>,
    /// (timeout, waiter) for waiters with a BLOCK timeout.
    timeouts: BTreeSet<(i64, WaiterId)>,
}

impl State {
    fn take(&mut self, id: WaiterId) -> Option<(Vec<KeyId>, Waiter)> {
        let (keys, w) = self.queues.remove(id)?;
        self.by_handle.remove(&w.handle.id());
        if let Some(t) = w.timeout_at {
            self.timeouts.remove(&(t, id));
        }
        self.graph.remove_blocked(&w.holder, id);
        for k in &keys {
            if !self.queues.has_waiters(k) {
                self.watch.remove(k);
            }
        }
        Some((keys, w))
    }

    /// The next moment the timer must act: a lease end or a timeout.
    fn next_event(&self) -> Option<i64> {
        let lease = self.watch.values().min().copied();
        let timeout = self.timeouts.first().map(|(t, _)| *t);
        lease.into_iter().chain(timeout).min()
    }
}

/// Keys removed by other hands since the last timer; `true`: all keys.
#[derive(Default)]
struct Pending {
    names: Vec<Vec<u8>>,
    all: bool,
}

const MAX_PENDING: usize = 4096;

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
    /// Grants whose reply was lost, with the client to disconnect.
    static LOST: RefCell<Vec<(Undo, u64)>> = const { RefCell::new(Vec::new()) };
    /// The armed timer: (id, fires at unix ms).
    static TIMER: Cell<Option<(u64, i64)>> = const { Cell::new(None) };
}

/// A context for arming timers from callbacks that have none.
static TIMER_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

pub fn init(ctx: &Context) {
    // SAFETY: called from OnLoad; the detached context lives as long as the
    // module and is only used to create and stop timers.
    let detached = unsafe { rm!(RedisModule_GetDetachedThreadSafeContext)(ctx.ctx) };
    TIMER_CTX.store(detached, Ordering::Relaxed);
    blocking::subscribe_flush(ctx);
}

fn arm(at: i64) {
    let ctx = Context::new(TIMER_CTX.load(Ordering::Relaxed));
    if ctx.ctx.is_null() {
        return;
    }
    if let Some((id, when)) = TIMER.get() {
        if when <= at {
            return;
        }
        blocking::stop_timer(&ctx, id);
    }
    let id = blocking::start_timer(&ctx, at - now_ms());
    TIMER.set(Some((id, at)));
}

pub fn key_id(ctx: &Context, name: &RedisString) -> KeyId {
    (blocking::selected_db(ctx), name.bytes().to_vec())
}

fn nobody_waits() -> bool {
    STATE.with(|s| s.try_borrow().map_or(true, |s| s.queues.is_empty()))
}

pub fn has_waiters(ctx: &Context, name: &RedisString) -> bool {
    if nobody_waits() {
        return false;
    }
    let key = key_id(ctx, name);
    with(|s| s.queues.has_waiters(&key))
}

/// Waiters queued on a key (for `LOCK.INFO` / `SEM.INFO`).
pub fn waiters(ctx: &Context, name: &RedisString) -> i64 {
    if nobody_waits() {
        return 0;
    }
    let key = key_id(ctx, name);
    with(|s| s.queues.len(&key)) as i64
}

/// (blocked clients, live wait edges) for `INFO`; None while busy.
pub fn gauges() -> Option<(i64, i64)> {
    let now = now_ms();
    STATE.with(|s| {
        s.try_borrow()
            .ok()
            .map(|s| (s.queues.waiting() as i64, s.graph.len(now) as i64))
    })
}

/// The holder got the key: a declared wait for it is over.
pub fn acquired(ctx: &Context, holder: &[u8], name: &RedisString) {
    if STATE.with(|s| s.borrow().graph.is_empty()) {
        return;
    }
    let key = key_id(ctx, name);
    with(|s| s.graph.acquired(holder, &key));
}

/// After a write to a key that has waiters: serve them if they can be, and
/// keep the timer on the key's new lease.
pub fn after_write(ctx: &Context, name: &RedisString) {
    if nobody_waits() {
        return;
    }
    let key = key_id(ctx, name);
    if with(|s| s.queues.has_waiters(&key)) {
        serve(ctx, &key);
    }
}

/// Who holds `name` now (in the selected database).
fn held_now(ctx: &Context, name: &RedisString, now: i64) -> Result<Held, Error> {
    let mut key = Key::read(ctx, name);
    Ok(match key.kind() {
        Kind::Lock => match key.lock()? {
            Some(l) => Held::Lock(l.holder.to_vec()),
            None => Held::Free,
        },
        Kind::Sem => match key.sem()? {
            Some(s) => Held::Sem(s.view(now).holders.into_iter().map(|h| h.0).collect()),
            None => Held::Free,
        },
        Kind::Empty => Held::Free,
        Kind::Other => return Err(Error::WrongType),
    })
}

fn held_at(ctx: &Context, key: &KeyId, now: i64) -> Held {
    blocking::in_db(ctx, key.0, || {
        let name = RedisString::create_from_slice(ctx.ctx, &key.1);
        held_now(ctx, &name, now).unwrap_or(Held::Free)
    })
}

fn render(cycle: Vec<Node<KeyId>>) -> Error {
    Error::Deadlock(
        cycle
            .into_iter()
            .map(|n| match n {
                Node::Holder(h) => h,
                Node::Key((_, name)) => name,
            })
            .collect(),
    )
}

/// `Err(DEADLOCK ...)` when `holder` waiting for `key` would close a cycle.
fn check_deadlock(ctx: &Context, holder: &[u8], key: &KeyId, now: i64) -> Result<(), Error> {
    // Even with no edges at all, a holder that wants more permits of a
    // semaphore it alone holds would wait for itself.
    let cycle = STATE.with(|s| {
        s.borrow()
            .graph
            .cycle_if_waits(holder, key, now, |k| held_at(ctx, k, now))
    });
    match cycle {
        Some(c) => {
            info::bump(&info::DEADLOCKS);
            Err(render(c))
        }
        None => Ok(()),
    }
}

/// Blocks the client on `keys` (all in the selected database), behind
/// everyone already queued there, unless that would deadlock.
pub fn wait(
    ctx: &Context,
    holder: &[u8],
    names: &[RedisString],
    want: Want,
    timeout_ms: i64,
) -> Result<RedisValue, Error> {
    let now = now_ms();
    let db = blocking::selected_db(ctx);
    let keys: Vec<KeyId> = names.iter().map(|n| (db, n.bytes().to_vec())).collect();
    for (key, name) in keys.iter().zip(names) {
        match held_now(ctx, name, now)? {
            Held::Lock(h) if h == holder => continue,
            _ => check_deadlock(ctx, holder, key, now)?,
        }
    }
    let handle = blocking::block(ctx);
    let expires = (timeout_ms > 0).then(|| now + timeout_ms);
    with(|s| {
        let hid = handle.id();
        let waiter = Waiter {
            handle,
            holder: holder.to_vec(),
            want,
            db,
            timeout_at: expires,
        };
        let id = s.queues.push(keys.clone(), waiter);
        s.by_handle.insert(hid, id);
        if let Some(t) = expires {
            s.timeouts.insert((t, id));
        }
        for k in &keys {
            s.graph.add_blocked(holder, k.clone(), id, expires);
        }
    });
    if let Some(t) = expires {
        arm(t);
    }
    for k in &keys {
        refresh(ctx, k);
    }
    Ok(RedisValue::NoReply)
}

/// A blocked client was unblocked (`CLIENT UNBLOCK`) or disconnected: it leaves
/// the queues and the graph now; the keys it was queued on are served at
/// once by the timer (whoever was behind it may be first now). False when
/// the client was not waiting any more.
pub fn forget(handle: usize) -> bool {
    let keys = with(|s| {
        let id = s.by_handle.get(&handle).copied()?;
        s.take(id).map(|(keys, _)| keys)
    });
    let Some(keys) = keys else {
        return false;
    };
    note_pending(keys.into_iter().map(|k| k.1));
    true
}

fn note_pending(names: impl IntoIterator<Item = Vec<u8>>) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        for n in names {
            if p.names.len() >= MAX_PENDING {
                p.all = true;
                break;
            }
            p.names.push(n);
        }
    });
    arm(now_ms());
}

/// A lock or semaphore key was removed by another hand, or its expiry
/// changed: serve and re-time its waiters at the next timer.
pub fn on_unlink(name: &[u8]) {
    if !nobody_waits() {
        note_pending([name.to_vec()]);
    }
}

/// FLUSHDB / FLUSHALL: every key with waiters may be free now.
pub fn on_flush() {
    if nobody_waits() {
        return;
    }
    PENDING.with(|p| p.borrow_mut().all = true);
    arm(now_ms());
}

/// Wakes, with nil, every waiter whose BLOCK timeout has come.
fn time_out(now: i64) {
    let gone: Vec<(Vec<KeyId>, Waiter)> = with(|s| {
        let due: Vec<WaiterId> = s
            .timeouts
            .iter()
            .take_while(|(t, _)| *t <= now)
            .map(|(_, id)| *id)
            .collect();
        due.into_iter().filter_map(|id| s.take(id)).collect()
    });
    for (keys, w) in gone {
        info::bump(&info::TIMEOUTS);
        blocking::wake(w.handle, Reply::Nil, None);
        note_pending(keys.into_iter().map(|k| k.1));
    }
}

/// A grant never reached its client (see `blocking::free_wake`).
pub fn lost(undo: Undo, client_id: u64) {
    LOST.with(|l| l.borrow_mut().push((undo, client_id)));
    arm(now_ms());
}

/// Takes back lost grants (serving whoever waits behind) and disconnects
/// their clients.
fn take_back(ctx: &Context) {
    let lost = LOST.with(|l| std::mem::take(&mut *l.borrow_mut()));
    for (undo, client_id) in lost {
        blocking::in_db(ctx, undo.db, || {
            let names = undo
                .keys
                .iter()
                .map(|k| RedisString::create_from_slice(ctx.ctx, k));
            match &undo.what {
                Granted::Locks(fences) => {
                    for (name, fence) in names.zip(fences) {
                        lock::undo_grant(ctx, &name, &undo.holder, *fence);
                    }
                }
                Granted::Permits(n) => {
                    for name in names {
                        sem::undo_grant(ctx, &name, &undo.holder, *n);
                    }
                }
            }
        });
        blocking::kill_client(ctx, client_id);
    }
}

/// How often the timer looks again while writes are paused.
const PAUSED_POLL_MS: i64 = 10;

pub fn on_timer(ctx: &Context) {
    TIMER.set(None);
    let now = now_ms();
    time_out(now);
    if !blocking::is_master(ctx) {
        return;
    }
    if !blocking::may_write(ctx) {
        // Paused or loading: hand-offs and take-backs wait (nothing is
        // lost: the pending keys, due leases and lost grants stay noted).
        let work = !nobody_waits() || LOST.with(|l| !l.borrow().is_empty());
        if work {
            arm(now + PAUSED_POLL_MS);
        }
        return;
    }
    take_back(ctx);
    let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let names: HashSet<Vec<u8>> = pending.names.into_iter().collect();
    let due: Vec<KeyId> = with(|s| {
        s.queues
            .keys()
            .filter(|k| {
                pending.all || names.contains(&k.1) || s.watch.get(*k).is_some_and(|at| *at <= now)
            })
            .cloned()
            .collect()
    });
    for key in &due {
        serve(ctx, key);
    }
    if let Some(at) = with(|s| s.next_event()) {
        arm(at);
    }
}

/// Grants the head of `key`'s queue while it can be granted; semaphores
/// may serve several waiters in a row.
fn serve(ctx: &Context, key: &KeyId) {
    if !blocking::is_master(ctx) {
        return;
    }
    if !blocking::may_write(ctx) {
        note_pending([key.1.clone()]);
        return;
    }
    let mut touched: Vec<KeyId> = Vec::new();
    loop {
        let next = with(|s| {
            let id = s.queues.head(key)?;
            if !s.queues.at_front_everywhere(id) {
                return None;
            }
            let (keys, w) = s.queues.get(id)?;
            Some((
                id,
                keys.clone(),
                w.holder.clone(),
                w.want,
                w.db,
                w.timeout_at,
            ))
        });
        let Some((id, keys, holder, want, db, timeout_at)) = next else {
            break;
        };
        if timeout_at.is_some_and(|t| t <= now_ms()) {
            // Its time ran out first: nil, and on to the next in line.
            time_out(now_ms());
            continue;
        }
        let outcome = blocking::in_db(ctx, db, || try_grant(ctx, &keys, &holder, want));
        let (reply, what) = match outcome {
            Ok(Some(granted)) => granted,
            Ok(None) => break,
            Err(Error::TryAgain) => {
                // The restart grace is running: serve when it ends.
                if let Some(end) = config::grace_ends(want.ttl_ms()) {
                    arm(end);
                }
                break;
            }
            Err(e) => (Reply::Error(e.message()), None),
        };
        let Some((keys, w)) = with(|s| s.take(id)) else {
            break;
        };
        info::bump(&info::HANDOFFS);
        // A multi-key grant also sets new leases on its other keys.
        touched.extend(keys.iter().filter(|k| *k != key).cloned());
        let undo = what.map(|what| Undo {
            db,
            keys: keys.into_iter().map(|k| k.1).collect(),
            holder,
            what,
        });
        blocking::wake(w.handle, reply, undo);
    }
    refresh(ctx, key);
    for k in &touched {
        refresh(ctx, k);
    }
}

/// Grants `want` now if it can be: the reply, and what was granted.
fn try_grant(
    ctx: &Context,
    keys: &[KeyId],
    holder: &[u8],
    want: Want,
) -> Result<Option<(Reply, Option<Granted>)>, Error> {
    let names: Vec<RedisString> = keys
        .iter()
        .map(|k| RedisString::create_from_slice(ctx.ctx, &k.1))
        .collect();
    let now = now_ms();
    Ok(match want {
        Want::Lock { ttl_ms } => lock::try_acquire(ctx, &names[0], holder, ttl_ms, now)?.map(|g| {
            (
                Reply::Int(g.fence as i64),
                Some(Granted::Locks(vec![g.fence])),
            )
        }),
        Want::Multi { ttl_ms } => lock::try_macquire(ctx, &names, holder, ttl_ms, now)?.map(|fs| {
            let reply = Reply::Ints(fs.iter().map(|f| *f as i64).collect());
            (reply, Some(Granted::Locks(fs)))
        }),
        Want::Sem {
            limit,
            permits,
            ttl_ms,
        } => sem::try_acquire(ctx, &names[0], holder, limit, permits, ttl_ms, now)?
            .map(|n| (Reply::Int(n as i64), Some(Granted::Permits(permits)))),
    })
}

/// Keeps the timer on when `key` may next free itself (its lease end, or a
/// semaphore's earliest holder lease end), while it has waiters.
fn refresh(ctx: &Context, key: &KeyId) {
    if !with(|s| s.queues.has_waiters(key)) {
        with(|s| s.watch.remove(key));
        return;
    }
    let at = blocking::in_db(ctx, key.0, || {
        let name = RedisString::create_from_slice(ctx.ctx, &key.1);
        let mut k = Key::read(ctx, &name);
        match k.kind() {
            Kind::Lock => k.expire_at(),
            Kind::Sem => k.sem().ok().flatten().and_then(|s| s.earliest_deadline()),
            _ => None,
        }
    });
    // Redis counts a key as expired only once the clock is past its
    // deadline: fire 1 ms after it. While the restart grace holds the head
    // of the queue back, try again when it ends.
    let now = now_ms();
    let head_ttl = with(|s| {
        let id = s.queues.head(key)?;
        s.queues.get(id).map(|(_, w)| w.want.ttl_ms())
    });
    let grace = head_ttl
        .and_then(config::grace_ends)
        .filter(|end| *end > now);
    let at = at.map(|t| t + 1).into_iter().chain(grace).min();
    with(|s| match at {
        Some(t) => s.watch.insert(key.clone(), t),
        None => s.watch.remove(key),
    });
    if let Some(t) = at {
        arm(t);
    }
}

/// `LOCK.WAITFOR`: 1 recorded, 0 nothing to wait for, or `DEADLOCK`.
pub fn waitfor(
    ctx: &Context,
    holder: &[u8],
    name: &RedisString,
    ttl_ms: i64,
) -> Result<RedisValue, Error> {
    let now = now_ms();
    let key = key_id(ctx, name);
    let nothing = match held_now(ctx, name, now)? {
        Held::Free => true,
        Held::Lock(h) => h == holder,
        Held::Sem(hs) => hs.is_empty() || hs.iter().any(|h| h == holder),
    };
    with(|s| s.graph.prune(now));
    if nothing {
        with(|s| s.graph.acquired(holder, &key));
        return Ok(RedisValue::Integer(0));
    }
    check_deadlock(ctx, holder, &key, now)?;
    with(|s| s.graph.declare(holder, key, now + ttl_ms));
    Ok(RedisValue::Integer(1))
}

/// `LOCK.GRAPH`: `[waiter, key, [holders...], ttl-ms-left]` per edge.
pub fn graph(ctx: &Context) -> RedisValue {
    let now = now_ms();
    let edges: Vec<(Vec<u8>, KeyId, Option<i64>)> = with(|s| {
        s.graph.prune(now);
        s.graph
            .edges(now)
            .into_iter()
            .map(|(h, e)| (h.to_vec(), e.key.clone(), e.expires_at))
            .collect()
    });
    RedisValue::Array(
        edges
            .into_iter()
            .map(|(waiter, key, expires)| {
                let holders = match held_at(ctx, &key, now) {
                    Held::Free => vec![],
                    Held::Lock(h) => vec![h],
                    Held::Sem(hs) => hs,
                };
                RedisValue::Array(vec![
                    RedisValue::StringBuffer(waiter),
                    RedisValue::StringBuffer(key.1),
                    RedisValue::Array(holders.into_iter().map(RedisValue::StringBuffer).collect()),
                    RedisValue::Integer(expires.map_or(-1, |t| (t - now).max(0))),
                ])
            })
            .collect(),
    )
}
