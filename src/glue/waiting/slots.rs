//! Cluster routing for the grants the timer makes. A command reaches a
//! node only through Redis' slot checks, but the timer's hand-off does
//! not: once `MIGRATE` (or a slot migration) took a key away, granting its
//! waiters here would create a second copy of the lock. Such waiters are
//! sent where Redis would send a new command for the key (`-ASK` while the
//! slot migrates, `-MOVED` once it moved). Rules: `core::cluster`.

use std::os::raw::c_int;

use redis_module::{Context, RedisValue};

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
        if !crate::glue::server::cluster_enabled(ctx) {
            return None;
        }
        let slot = cluster::key_slot(&key.name);
        // Redis 8.4+: a slot moved away by atomic migration (its keys still
        // here until trimmed), being trimmed, or only being imported is not
        // this node's to serve.
        if !can_access_slot(slot) {
            let nodes = self.nodes.get_or_insert_with(|| cluster_nodes(ctx));
            return cluster::route(nodes.as_deref()?, slot)
                .and_then(|r| r.redirect(slot))
                .or_else(|| Some("TRYAGAIN the key's slot is moving".to_owned()));
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
        cluster::route(nodes.as_deref()?, slot)?.redirect(slot)
    }
}

/// May this node touch `key` from a timer? Not while its slot is being
/// imported, trimmed or has moved away (Redis 8.4+; elsewhere always).
pub fn may_touch(ctx: &Context, key: &[u8]) -> bool {
    !crate::glue::server::cluster_enabled(ctx) || can_access_slot(cluster::key_slot(key))
}

/// `RM_ClusterCanAccessKeysInSlot` where the server has it (Redis 8.4+);
/// true elsewhere, where only the key's presence tells.
fn can_access_slot(slot: u16) -> bool {
    // SAFETY: reading the API table, written once at load.
    match unsafe { redis_module::raw::RedisModule_ClusterCanAccessKeysInSlot } {
        // SAFETY: a plain call with a slot number.
        Some(f) => unsafe { f(c_int::from(slot)) != 0 },
        None => true,
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
