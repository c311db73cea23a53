//! What only requests that wait through a mailbox need: they block no
//! client, so nothing of Redis' tells padlock when their connection
//! closes (the `ClientChange` event does), and a caller that stops
//! waiting takes its request back by its id (`LOCK.CANCEL`).

use std::cell::RefCell;

use redis_module::{Context, RedisString};

use super::super::blocking::{self, Reply};
use super::super::info;
use super::handoff;
use super::state::{self, Party};
use super::timer;
use crate::core::ids::Address;

thread_local! {
    /// Connections that closed while the state was busy.
    static CLOSED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A connection closed: its mailbox requests leave the queues and the
/// wait-for graph now, as a blocked client's would; whoever was behind
/// them is served at the next timer. Called from Redis' `freeClient`,
/// so it only touches memory.
pub fn client_gone(client: u64) {
    if state::nobody_waits() {
        return;
    }
    let taken = state::try_with(|s| {
        let ids = s.of_client(client);
        let mut keys = Vec::new();
        for id in ids {
            if let Some((k, e)) = s.take(id) {
                s.graph.remove_blocked(&e.payload.holder, id);
                keys.extend(k);
            }
        }
        keys
    });
    match taken {
        Some(keys) => timer::note(keys.into_iter().map(|k| k.name)),
        None => {
            CLOSED.with(|c| c.borrow_mut().push(client));
            timer::arm(crate::glue::server::now_ms());
        }
    }
}

/// Connections noted while the state was busy, dropped now (the timer).
pub fn settle() {
    let closed = CLOSED.with(|c| std::mem::take(&mut *c.borrow_mut()));
    for c in closed {
        client_gone(c);
    }
}

/// `LOCK.CANCEL key holder request-id`: the request queued with that id
/// on `key` (its first key, for `LOCK.MACQUIRE`) leaves its queues; a
/// blocked one is answered nil. True when it was still queued. The keys
/// it waited on are served at the end of the command (whoever was behind
/// it may be first now).
pub fn cancel(ctx: &Context, key: &RedisString, holder: &[u8], rid: &[u8]) -> bool {
    if state::nobody_waits() {
        return false;
    }
    let at = Address::new(blocking::selected_db(ctx), key.as_slice(), holder);
    let taken = state::with(|s| {
        let id = s.by_id(&at, rid)?;
        let (keys, e) = s.take(id)?;
        s.graph.remove_blocked(&e.payload.holder, id);
        Some((keys, e.payload.to))
    });
    let Some((keys, to)) = taken else {
        return false;
    };
    info::bump(&info::CANCELLED);
    // Its caller asked: a mailbox hears nothing more of it.
    if let Party::Blocked(h) = to {
        handoff::tell(Some(ctx), Party::Blocked(h), Reply::Nil, None);
    }
    for k in keys {
        handoff::note_ready(k);
    }
    true
}
