//! Mailbox waits when their slot starts to move away (`glue::leaving`): a
//! blocked client is answered `-MOVED` once ownership moved (its connection
//! stays here), but a queued mailbox wait is told `-TRYAGAIN` when the move
//! begins, a post of the moving slot that goes with the slot's data.

use redis_module::Context;

use super::super::blocking::Reply;
use super::super::info;
use super::super::leaving;
use super::{handoff, state};
use crate::core::error::SLOT_MOVING;

/// A move away began: the queued mailbox waits on its keys are told.
pub fn began(ctx: &Context) {
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
                        && keys.iter().any(|k| leaving::has(&k.name))
                })
            })
            .collect()
    });
    let reply = Reply::Error(SLOT_MOVING.to_owned());
    handoff::dismiss(Some(ctx), told, &reply, &info::TURNED_AWAY);
}
