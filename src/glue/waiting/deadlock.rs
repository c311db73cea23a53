//! The deadlock check against live keys, and the bodies of `LOCK.WAITFOR`
//! and `LOCK.GRAPH`. The rule itself is `core::waitgraph::find_cycle`.

use redis_module::{Context, RedisString, RedisValue};

use super::super::blocking;
use super::super::info;
use super::super::key::Key;
use super::super::server::now_ms;
use super::state::{self, KeyId, Want};
use crate::core::error::Error;
use crate::core::waitgraph::{find_cycle, Held, Need, Node};

/// Who holds `name` now (in the selected database).
pub fn held_now(ctx: &Context, name: &RedisString, now: i64) -> Result<Held, Error> {
    let key = Key::read(ctx, name);
    Ok(key.stored()?.map_or_else(Held::free, |v| v.held(now)))
}

/// Which request of a holder on a key the check looks at.
#[derive(Clone, Copy)]
pub enum Request<'a> {
    /// Its first request queued there.
    Queued,
    /// One about to be queued (behind everyone, or behind those at the
    /// front when it `jumps_queue`).
    New(&'a dyn Want),
    /// A wait declared with `LOCK.WAITFOR`: not queued; it needs the key
    /// alone and waits for its holders only.
    Declared,
}

fn held_at(ctx: &Context, key: &KeyId, now: i64) -> Held {
    blocking::in_db(ctx, key.db, || {
        held_now(ctx, &key.name(ctx), now).unwrap_or_default()
    })
}

/// Whom `x`'s request on `key` waits for: the holders it cannot share the
/// key with, and the conflicting requests queued ahead of it (`req` says
/// which of `x`'s requests is meant; one queued or declared is looked up).
fn waits_on(ctx: &Context, x: &[u8], key: &KeyId, req: Request, now: i64) -> Held {
    let (need, ahead) = state::with(|s| {
        let mut ahead = vec![];
        for id in s.waiters.queue(key) {
            let Some((_, e)) = s.waiters.get(id) else {
                continue;
            };
            let (holder, want) = (&e.payload.holder, &e.payload.want);
            match req {
                Request::Queued if holder.as_slice() == x => return (want.need(), ahead),
                Request::New(n) if n.jumps_queue() && !want.jumps_queue() => break,
                Request::Declared => break,
                _ => ahead.push((holder.clone(), want.need())),
            }
        }
        match req {
            Request::New(want) => (want.need(), ahead),
            _ => (Need::Exclusive, vec![]),
        }
    });
    let mut held = blocking::in_db(ctx, key.db, || {
        let name = key.name(ctx);
        let k = Key::read(ctx, &name);
        k.stored()
            .ok()
            .flatten()
            .map_or_else(Held::free, |v| v.held_for(x, need, now))
    });
    held.all.extend(
        ahead
            .into_iter()
            .filter(|(h, n)| h.as_slice() != x && n.conflicts(need))
            .map(|(h, _)| h),
    );
    held
}

fn render(cycle: Vec<Node<KeyId>>) -> Error {
    Error::Deadlock(
        cycle
            .into_iter()
            .map(|n| match n {
                Node::Holder(h) => h,
                Node::Key(k) => k.name,
            })
            .collect(),
    )
}

/// `Err(DEADLOCK ...)` when `holder` waiting for `key` with `req` (`New`
/// or `Declared`) would close a cycle. Keys are read between short
/// borrows of the state, never during one.
pub fn check(
    ctx: &Context,
    holder: &[u8],
    key: &KeyId,
    req: Request,
    now: i64,
) -> Result<(), Error> {
    let cycle = find_cycle(
        holder,
        key,
        |h| state::with(|s| s.graph.waits_for(h, now)),
        |x, k| {
            let req = if x == holder && k == key {
                req
            } else {
                Request::Queued
            };
            waits_on(ctx, x, k, req, now)
        },
    );
    match cycle {
        Some(c) => {
            info::bump(&info::DEADLOCKS);
            Err(render(c))
        }
        None => Ok(()),
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
    check(ctx, holder, &key, Request::Declared, now)?;
    state::with(|s| s.graph.declare(holder, key, now + ttl_ms));
    Ok(RedisValue::Integer(1))
}

/// `LOCK.GRAPH`: `[waiter, key, [holders...], ttl-ms-left]` per edge.
pub fn graph(ctx: &Context) -> RedisValue {
    let now = now_ms();
    let edges: Vec<(Vec<u8>, KeyId, Option<i64>)> = state::with(|s| {
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
                let holders: Vec<_> = held_at(ctx, &key, now).holders().cloned().collect();
                RedisValue::Array(vec![
                    RedisValue::StringBuffer(waiter),
                    RedisValue::StringBuffer(key.name),
                    RedisValue::Array(holders.into_iter().map(RedisValue::StringBuffer).collect()),
                    RedisValue::Integer(expires.map_or(-1, |t| (t - now).max(0))),
                ])
            })
            .collect(),
    )
}
