//! Slots this node is moving away by atomic slot migration, and what that
//! means for mailbox waits. A blocked client is answered `-MOVED` once
//! ownership moved (its connection stays here), but a mailbox moves with
//! its slot: a post made after the move could only create a stray key
//! here, and one the new owner never sees. So a queued mailbox wait is
//! told `-TRYAGAIN` when the move begins (the post is a write of the
//! moving slot: it goes with the slot's data), and a new one is refused
//! with `-TRYAGAIN` until the move ends; the caller waits again, on the
//! new owner once it moved.

use std::cell::RefCell;

use redis_module::Context;

use super::super::blocking::Reply;
use super::super::info;
use super::{handoff, state};
use crate::core::cluster;
use crate::core::error::{Error, SLOT_MOVING};

thread_local! {
    /// Slot ranges of the moves in progress (a few at most).
    static MOVING: RefCell<Vec<(u16, u16)>> = const { RefCell::new(Vec::new()) };
}

fn moving(slot: u16) -> bool {
    MOVING.with(|m| m.borrow().iter().any(|&(a, b)| (a..=b).contains(&slot)))
}

/// A move of `ranges` away began: their queued mailbox waits are told.
pub fn began(ctx: &Context, ranges: &[(u16, u16)]) {
    MOVING.with(|m| m.borrow_mut().extend_from_slice(ranges));
    if state::nobody_waits() {
        return;
    }
    let told: Vec<_> = state::with(|s| {
        s.waiters
            .ids()
            .into_iter()
            .filter(|&id| {
                s.waiters.get(id).is_some_and(|(keys, e)| {
                    matches!(e.payload.to, state::Party::Mailbox { .. })
                        && keys.iter().any(|k| moving(cluster::key_slot(&k.name)))
                })
            })
            .collect()
    });
    let reply = Reply::Error(SLOT_MOVING.to_owned());
    handoff::dismiss(Some(ctx), told, &reply, &info::TURNED_AWAY);
}

/// A move of `ranges` ended (done or given up).
pub fn ended(ranges: &[(u16, u16)]) {
    MOVING.with(|m| m.borrow_mut().retain(|r| !ranges.contains(r)));
}

/// A mailbox wait on `key` now: refused while its slot moves away.
pub fn check(key: &[u8]) -> Result<(), Error> {
    let none = MOVING.with(|m| m.borrow().is_empty());
    if none || !moving(cluster::key_slot(key)) {
        return Ok(());
    }
    Err(Error::SlotMoving)
}
