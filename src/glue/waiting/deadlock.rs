//! The deadlock check against live keys, and the bodies of `LOCK.WAITFOR`
//! and `LOCK.GRAPH`. The rule itself is `core::waitgraph::find_cycle`.

use redis_module::{Context, RedisString, RedisValue};

use super::super::blocking;
use super::super::info;
use super::super::key::Key;
use super::super::server::now_ms;
use super::state::{self, KeyId};
use crate::core::error::Error;
use crate::core::waitgraph::{find_cycle, Held, Node};

/// Who holds `name` now (in the selected database).
pub fn held_now(ctx: &Context, name: &RedisString, now: i64) -> Result<Held, Error> {
    let key = Key::read(ctx, name);
    Ok(key.stored()?.map_or(Held::Free, |v| v.held(now)))
}

fn held_at(ctx: &Context, key: &KeyId, now: i64) -> Held {
    blocking::in_db(ctx, key.db, || {
        held_now(ctx, &key.name(ctx), now).unwrap_or(Held::Free)
    })
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

/// `Err(DEADLOCK ...)` when `holder` waiting for `key` would close a cycle.
/// Keys are read between short borrows of the state, never during one.
pub fn check(ctx: &Context, holder: &[u8], key: &KeyId, now: i64) -> Result<(), Error> {
    let cycle = find_cycle(
        holder,
        key,
        |h| state::with(|s| s.graph.waits_for(h, now)),
        |k| held_at(ctx, k, now),
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
    let nothing = held.holders().is_empty() || held.holders().iter().any(|h| h == holder);
    state::with(|s| s.graph.prune(now));
    if nothing {
        state::with(|s| s.graph.acquired(holder, &key));
        return Ok(RedisValue::Integer(0));
    }
    check(ctx, holder, &key, now)?;
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
                let holders = held_at(ctx, &key, now).holders().to_vec();
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
