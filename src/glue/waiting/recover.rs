//! Grants whose reply never reached the client (it went away, or Redis 7.0
//! dropped the reply when `CLIENT UNBLOCK` hit it in the pass it was
//! granted): taken back on the next timer, serving whoever waits behind,
//! and the client is disconnected so that it does not wait forever.

use std::cell::RefCell;
use std::rc::Rc;

use redis_module::{Context, RedisString};

use super::super::blocking;
use super::super::requests::{self, Tag};
use super::super::server::now_ms;
use super::state::TakeBack;
use super::timer;

/// A grant to take back if its reply is lost.
pub struct Undo {
    pub db: i32,
    pub keys: Vec<Vec<u8>>,
    pub holder: Vec<u8>,
    pub take_back: Box<dyn TakeBack>,
    /// The grant's request-id: forgotten with the grant.
    pub request: Option<Rc<Tag>>,
}

thread_local! {
    /// Lost grants, with the client to disconnect.
    static LOST: RefCell<Vec<(Undo, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Notes a lost grant (from Redis' free callback, which may not write).
pub fn lost(undo: Undo, client_id: u64) {
    LOST.with(|l| l.borrow_mut().push((undo, client_id)));
    timer::arm(now_ms());
}

pub fn any_lost() -> bool {
    LOST.with(|l| !l.borrow().is_empty())
}

/// Takes back every lost grant and disconnects its client.
pub fn take_back(ctx: &Context) {
    let lost = LOST.with(|l| std::mem::take(&mut *l.borrow_mut()));
    for (undo, client_id) in lost {
        blocking::in_db(ctx, undo.db, || {
            let names: Vec<RedisString> = undo
                .keys
                .iter()
                .map(|k| RedisString::create_from_slice(ctx.ctx, k))
                .collect();
            undo.take_back.take_back(ctx, &names, &undo.holder);
            if let Some(tag) = &undo.request {
                requests::taken_back(ctx, tag);
            }
        });
        blocking::kill_client(ctx, client_id);
    }
}
