//! Cluster routing for the grants the timer makes. A command reaches a
//! node only through Redis' slot checks, but the timer's hand-off does
//! not: once `MIGRATE` (or a slot migration) took a key away, granting its
//! waiters here would create a second copy of the lock. Such waiters are
//! sent where Redis would send a new command for the key (`-ASK` while the
//! slot migrates, `-MOVED` once it moved). Rules: `core::cluster`.

use redis_module::{Context, ContextFlags, RedisValue};

use super::super::blocking;
use super::super::key::Key;
use super::state::KeyId;
use crate::core::cluster;

/// The slot map, read at most once per timer pass and only when a key to
/// serve is missing here.
#[derive(Default)]
pub struct Slots {
    nodes: Option<Option<String>>,
}

impl Slots {
    /// The reply for the waiters of `key` when this node may not create
    /// it; None when they may be served here.
    pub fn redirect(&mut self, ctx: &Context, key: &KeyId) -> Option<String> {
        if !ctx.get_flags().contains(ContextFlags::CLUSTER) {
            return None;
        }
        let missing = blocking::in_db(ctx, key.db, || {
            let name = key.name(ctx);
            let key = Key::read(ctx, &name);
            let missing = matches!(key.stored(), Ok(None));
            missing
        });
        if !missing {
            return None;
        }
        let nodes = self.nodes.get_or_insert_with(|| cluster_nodes(ctx));
        let slot = cluster::key_slot(&key.name);
        cluster::route(nodes.as_deref()?, slot)?.redirect(slot)
    }
}

fn cluster_nodes(ctx: &Context) -> Option<String> {
    match ctx.call("CLUSTER", &["NODES"]) {
        Ok(RedisValue::SimpleString(s)) => Some(s),
        Ok(RedisValue::BulkString(s)) => Some(s),
        Ok(RedisValue::StringBuffer(b)) => String::from_utf8(b).ok(),
        _ => None,
    }
}
