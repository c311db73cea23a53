//! The deadlock check against live keys, and the bodies of `LOCK.WAITFOR`
//! and `LOCK.GRAPH`. The rule itself is `core::waitgraph::find_cycle`.

use crate::core::hash::Map;
use std::cell::RefCell;

use redis_module::{Context, RedisString, RedisValue};

use super::super::blocking;
use super::super::config;
use super::super::info;
use super::super::key::Key;
use super::super::server::now_ms;
use super::state::{self, KeyId, Want};
use crate::core::error::Error;
use crate::core::queue::{WaiterId, FRONT};
use crate::core::waitgraph::{clear_at_once, find_cycle, Found, Held, Need, Node};
use crate::glue::acl::Reader;
use crate::glue::types::Stored;

/// Who holds `name` now (in the selected database).
pub fn held_now(ctx: &Context, name: &RedisString, now: i64) -> Result<Held, Error> {
    let key = Key::read(ctx, name);
    Ok(key.stored()?.map_or_else(Held::free, |v| v.held(now)))
}

/// Which request of a holder on a key the check looks at.
#[derive(Clone, Copy)]
pub enum Request<'a> {
    /// Its first request queued there, with this waiter id.
    Queued(u64),
    /// One about to be queued (behind everyone, or behind those at the
    /// front when it `jumps_queue`).
    New(&'a dyn Want),
    /// A wait declared with `LOCK.WAITFOR`: not queued; it needs the key
    /// alone and waits for its holders only.
    Declared,
}

/// Reads `key` in its own database: `f` gets its value when it is one of
/// padlock's (nothing for a missing key or another type).
fn reading<R>(ctx: &Context, key: &KeyId, f: impl FnOnce(Option<&dyn Stored>) -> R) -> R {
    blocking::in_db(ctx, key.db, || {
        let name = key.name(ctx);
        let k = Key::read(ctx, &name);
        f(k.stored().ok().flatten())
    })
}

fn held_at(ctx: &Context, key: &KeyId, now: i64) -> Held {
    reading(ctx, key, |v| v.map_or_else(Held::free, |v| v.held(now)))
}

/// The requests ahead that `x`'s request (needing `need`) waits for, from
/// `ahead` (nearest first): the nearest conflicting one, and when that one
/// shares (a reader), the readers just before it. Those wait for whoever is
/// ahead of them in turn, so the chain covers the rest of the queue (a
/// property test checks this finds what waiting for every request ahead
/// finds), and a check reads a request or two per key and waiter, never a
/// whole queue.
fn nearest_ahead(
    ahead: impl Iterator<Item = (Vec<u8>, Need)>,
    x: &[u8],
    need: Need,
) -> Vec<Vec<u8>> {
    let mut it = ahead
        .filter(|(h, _)| h.as_slice() != x)
        .skip_while(|(_, n)| !n.conflicts(need));
    let Some((h, n)) = it.next() else {
        return vec![];
    };
    let mut out = vec![h];
    if n == Need::Shared {
        out.extend(it.take_while(|(_, n)| *n == Need::Shared).map(|(h, _)| h));
    }
    out
}

/// Whom `x`'s request on `key` waits for: the holders it cannot share the
/// key with, and the conflicting requests queued ahead of it (`req` says
/// which of `x`'s requests is meant: `Queued(id)` names its waiter).
fn waits_on(ctx: &Context, root: &[u8], x: &[u8], key: &KeyId, req: Request, now: i64) -> Held {
    let (need, ahead) = requests_ahead(root, x, key, req);
    let mut held = blocking::in_db(ctx, key.db, || {
        let name = key.name(ctx);
        let k = Key::read(ctx, &name);
        k.stored()
            .ok()
            .flatten()
            .map_or_else(Held::free, |v| v.held_for(x, need, now))
    });
    held.all.extend(ahead);
    held
}

/// `waits_on` for holders already read (by the refused attempt itself).
fn with_ahead(mut held: Held, root: &[u8], x: &[u8], key: &KeyId, req: Request) -> Held {
    held.all.extend(requests_ahead(root, x, key, req).1);
    held
}

/// What `x`'s request needs, and the requests queued ahead of it that it
/// waits for.
fn requests_ahead(root: &[u8], x: &[u8], key: &KeyId, req: Request) -> (Need, Vec<Vec<u8>>) {
    state::with(|s| {
        let (need, before, summary) = match req {
            Request::Declared => return (Need::Exclusive, vec![]),
            Request::New(want) => {
                let before = if want.jumps_queue() {
                    FRONT
                } else {
                    WaiterId::MAX
                };
                (want.need(), before, summarised(want))
            }
            Request::Queued(id) => {
                let Some(want) = s.waiters.get(id).map(|(_, e)| &e.payload.want) else {
                    return (Need::Exclusive, vec![]);
                };
                (want.need(), id, summarised(&**want))
            }
        };
        if summary {
            return (need, summary_ahead(s, root, x, key, before));
        }
        let ahead = s.waiters.ahead(key, before).filter_map(|id| {
            let w = &s.waiters.get(id)?.1.payload;
            Some((w.holder.clone(), w.want.need()))
        });
        (need, nearest_ahead(ahead, x, need))
    })
}

/// On a lock or semaphore key every request waits for all those ahead of
/// it; one whose holder waits for nothing else reaches only this key's
/// holders (whom `x` waits for itself) and what the requests ahead of it
/// reach. So only the others count (`WaitGraph::complex_ahead`), and of
/// them the nearest, which waits for the rest in turn: O(1), not O(queue). The holder being checked (`root`) has one request more
/// than the graph shows, the one about to queue: its queued ones count too,
/// and its new one waits for the nearest other request when that one is
/// behind one of its own. (The property test `long_queues_match_brute_force`
/// checks this rule against waiting for every request ahead.)
fn summary_ahead(
    s: &state::State,
    root: &[u8],
    x: &[u8],
    key: &KeyId,
    before: WaiterId,
) -> Vec<Vec<u8>> {
    let holder = |id: WaiterId| s.waiters.get(id).map(|(_, e)| e.payload.holder.clone());
    // The nearest one: it waits for all those ahead of it in turn.
    let mut out: Vec<Vec<u8>> = s
        .graph
        .complex_ahead(key, before)
        .filter_map(holder)
        .find(|h| h.as_slice() != x)
        .into_iter()
        .collect();
    let own_before = |b: WaiterId| s.graph.first_blocked(root, key).is_some_and(|r| r < b);
    if x != root {
        if own_before(before) {
            out.push(root.to_vec());
        }
    } else if let Some(id) = s.waiters.ahead(key, before).find(|&id| {
        s.waiters
            .get(id)
            .is_some_and(|(_, e)| e.payload.holder != root)
    }) {
        // Copied only when it counts (rarely: the root queued behind it).
        if own_before(id) {
            out.extend(holder(id));
        }
    }
    out
}

/// Whether a request's key is one where all requests conflict (a lock or a
/// semaphore), so that the complex requests ahead summarise the queue.
fn summarised(want: &dyn Want) -> bool {
    want.kind().all_conflict
}

/// The cycle as the calling user may see it (see `acl::Reader`).
fn render(ctx: &Context, cycle: Vec<Node<KeyId>>) -> Error {
    let nodes = cycle
        .into_iter()
        .map(|n| match n {
            Node::Holder(h) => h,
            Node::Key(k) => k.name.to_vec(),
        })
        .collect();
    Error::Deadlock(Reader::of(ctx).mask_cycle(nodes))
}

/// Requests a check may read before it gives up: cycles worth reporting
/// are short, and a check must stay cheap however large the graph.
const BUDGET: usize = 1024;

/// `Err(DEADLOCK ...)` when `holder` waiting for `keys` (one request) with
/// `req` (`New` or `Declared`) would close a cycle. Keys are read between
/// short borrows of the state, never during one. A check too large for its
/// budget lets the wait go ahead (and is counted).
pub fn check(
    ctx: &Context,
    holder: &[u8],
    keys: &[KeyId],
    req: Request,
    now: i64,
    known: Option<Held>,
) -> Result<(), Error> {
    // What the refused attempt already read of its one key, with the
    // requests ahead: when none of those it waits for waits for anything,
    // nothing can lead back to it (the common case on a hot key: checked
    // without building the graph).
    let first = match (known, keys) {
        (Some(held), [only]) => Some(with_ahead(held, holder, holder, only, req)),
        _ => None,
    };
    if let Some(first) = &first {
        if state::with(|s| clear_at_once(holder, first, |h| !s.graph.has_edges(h))) {
            return Ok(());
        }
    }
    // The waiter id of each request read, noted as the edges are read.
    let ids: RefCell<Map<(Vec<u8>, KeyId), u64>> = RefCell::default();
    let found = find_cycle(
        holder,
        keys,
        |h| {
            let by = state::with(|s| s.graph.waits_for_by(h, now));
            let mut ids = ids.borrow_mut();
            by.into_iter()
                .map(|(k, id)| {
                    if let Some(id) = id {
                        ids.insert((h.to_vec(), k.clone()), id);
                    }
                    k
                })
                .collect()
        },
        |x, k| {
            let req = if x == holder && keys.contains(k) {
                if let Some(first) = &first {
                    return first.clone();
                }
                req
            } else {
                match ids.borrow().get(&(x.to_vec(), k.clone())) {
                    Some(id) => Request::Queued(*id),
                    None => Request::Declared,
                }
            };
            waits_on(ctx, holder, x, k, req, now)
        },
        BUDGET + keys.len(),
    );
    match found {
        Found::Cycle(c) => {
            info::bump(&info::DEADLOCKS);
            Err(render(ctx, c))
        }
        Found::Clear => Ok(()),
        Found::TooBig => {
            info::bump(&info::DEADLOCK_CHECKS_TOO_BIG);
            Ok(())
        }
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
    let key = KeyId::of(ctx, name);
    let held = held_now(ctx, name, now)?;
    let nothing = held.is_free() || held.holders().any(|h| h == holder);
    state::with(|s| s.graph.prune(now));
    if nothing {
        state::with(|s| s.graph.acquired(holder, &key));
        return Ok(RedisValue::Integer(0));
    }
    let limit = config::MAX_WAIT_EDGES.load(std::sync::atomic::Ordering::Relaxed);
    if state::with(|s| s.graph.declared() as i64 >= limit && !s.graph.has_declared(holder)) {
        return Err(Error::TooManyEdges { limit });
    }
    check(
        ctx,
        holder,
        std::slice::from_ref(&key),
        Request::Declared,
        now,
        None,
    )?;
    state::with(|s| s.graph.declare(holder, key, now + ttl_ms));
    Ok(RedisValue::Integer(1))
}

/// `LOCK.GRAPH`: `[waiter, key, [holders...], ttl-ms-left, db]` per edge,
/// at most `count`, and only edges whose key the caller may read. Replied
/// straight from the values as each key is open (no reply tree, no copy
/// of a holder): what is left per edge is Redis' key lookup and its reply
/// calls. A key named by the next edge too (a hot key's waiters) is read
/// once for the run of them.
pub fn graph(ctx: &Context, count: usize) -> RedisValue {
    let now = now_ms();
    let reader = Reader::of(ctx);
    let edges: Vec<(Vec<u8>, KeyId, Option<i64>)> = state::with(|s| {
        s.graph.prune(now);
        s.graph
            .edges(now, count, |k| reader.may_read(&k.name))
            .into_iter()
            .map(|(h, e)| (h.to_vec(), e.key.clone(), e.expires_at))
            .collect()
    });
    let out = Out(ctx.ctx);
    out.array(edges.len());
    let mut run: Option<(&KeyId, Held)> = None;
    for (i, (waiter, key, expires)) in edges.iter().enumerate() {
        out.array(5);
        out.bytes(waiter);
        out.bytes(&key.name);
        match &run {
            Some((k, held)) if *k == key => out.held(held),
            _ if edges.get(i + 1).is_some_and(|next| next.1 == *key) => {
                let held = held_at(ctx, key, now);
                out.held(&held);
                run = Some((key, held));
            }
            _ => reading(ctx, key, |v| {
                let mut n = 0;
                if let Some(v) = v {
                    v.each_holder(now, &mut |_| n += 1);
                }
                out.array(n);
                if let Some(v) = v {
                    v.each_holder(now, &mut |h| out.bytes(h));
                }
            }),
        }
        out.int(expires.map_or(-1, |t| (t - now).max(0)));
        out.int(i64::from(key.db));
    }
    RedisValue::NoReply
}

/// A reply written as it goes (`graph`).
struct Out(*mut redis_module::raw::RedisModuleCtx);

impl Out {
    fn array(&self, n: usize) {
        // SAFETY: the command's live context.
        unsafe { rm!(RedisModule_ReplyWithArray)(self.0, n as _) };
    }

    fn bytes(&self, b: &[u8]) {
        // SAFETY: as above; Redis copies the bytes.
        unsafe { rm!(RedisModule_ReplyWithStringBuffer)(self.0, b.as_ptr().cast(), b.len()) };
    }

    fn held(&self, held: &Held) {
        self.array(held.all.len() + held.any.len());
        held.holders().for_each(|h| self.bytes(h));
    }

    fn int(&self, v: i64) {
        // SAFETY: as above.
        unsafe { rm!(RedisModule_ReplyWithLongLong)(self.0, v) };
    }
}

/// `LOCK.TOP`: `[key, kind, waiters, oldest-wait-ms, holders, db]` for the
/// `count` keys with the most waiters (longest wait first among equals),
/// only keys the caller may read. O(K log K), K the keys with waiters.
pub fn top(ctx: &Context, count: usize) -> RedisValue {
    let now = now_ms();
    let reader = Reader::of(ctx);
    let mut hot: Vec<super::Hot> = super::hot_keys()
        .into_iter()
        .filter(|h| reader.may_read(&h.key.name))
        .collect();
    hot.sort_by(|a, b| {
        b.waiters
            .cmp(&a.waiters)
            .then(a.oldest_since.cmp(&b.oldest_since))
    });
    hot.truncate(count);
    RedisValue::Array(
        hot.into_iter()
            .map(|h| {
                let holders = held_at(ctx, &h.key, now).holders().count();
                RedisValue::Array(vec![
                    RedisValue::StringBuffer(h.key.name.to_vec()),
                    RedisValue::BulkString(h.kind.to_string()),
                    RedisValue::Integer(h.waiters as i64),
                    RedisValue::Integer((now - h.oldest_since).max(0)),
                    RedisValue::Integer(holders as i64),
                    RedisValue::Integer(i64::from(h.key.db)),
                ])
            })
            .collect(),
    )
}
