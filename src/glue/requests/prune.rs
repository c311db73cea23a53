//! Forgetting: a group of ids comes due `id-memory-ms` after its latest
//! request; if its holder still holds the key it is kept another
//! `id-memory-ms`, else forgotten. Past `max-remembered-ids` the groups
//! of freed keys go, the oldest first (one found held after all is kept). Its own timer, a
//! bounded batch per firing, so no command pays for another's memory.

use std::os::raw::c_void;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::{raw, Context, RedisString};

use super::memory::{arm_for, rearm, TIMER};
use super::{bounds, with};
use crate::core::ids::Address;
use crate::glue::blocking;
use crate::glue::config;
use crate::glue::key::Key;
use crate::glue::server::now_ms;

/// Groups looked at per timer firing, and per remembered request when past
/// `max-remembered-ids`.
const BATCH: usize = 1000;
const PER_REQUEST: usize = 4;

pub fn init(ctx: &Context) {
    TIMER.with(|t| t.init(ctx, fire));
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || prune(&ctx, BATCH));
}

/// After a request was remembered: keeps the freed keys' ids within
/// `max-remembered-ids` and makes sure the timer will come. Each look
/// either forgets a group or finds it held and takes it out of the freed,
/// so a request pays for at most a few, and nothing while under the bound.
pub fn after_remember(ctx: &Context, now: i64) {
    let max = config::MAX_REMEMBERED_IDS.load(Relaxed).max(0) as usize;
    // One look at the memory in the common case: under the bound.
    let (over, due) = with(|m| (m.freed_len() > max, m.next_due()));
    if !over {
        arm_for(due, now);
        return;
    }
    for _ in 0..PER_REQUEST {
        let Some(at) = with(|m| {
            (m.freed_len() > max)
                .then(|| m.oldest_freed().cloned())
                .flatten()
        }) else {
            break;
        };
        decide(ctx, &at, now, bounds().memory_ms);
    }
    rearm(now);
}

/// Looks at up to `budget` groups that are due.
fn prune(ctx: &Context, budget: usize) {
    let now = now_ms();
    let memory_ms = bounds().memory_ms;
    for _ in 0..budget {
        let Some(at) = with(|m| m.due(now)) else {
            break;
        };
        decide(ctx, &at, now, memory_ms);
    }
    rearm(now);
}

/// Keeps a group whose holder still holds its key, forgets it otherwise.
fn decide(ctx: &Context, at: &Address, now: i64, memory_ms: i64) {
    if holds(ctx, at, now) {
        with(|m| m.keep_until(at, now.saturating_add(memory_ms)));
    } else {
        with(|m| m.forget(at));
    }
}

/// Whether the group's holder holds its key now (read, never written).
fn holds(ctx: &Context, at: &Address, now: i64) -> bool {
    blocking::in_db(ctx, at.db, || {
        let name = RedisString::create_from_slice(ctx.ctx, at.key());
        let key = Key::read(ctx, &name);
        match key.stored() {
            Ok(Some(v)) => v.held(now).holders().any(|h| **h == *at.holder()),
            _ => false,
        }
    })
}
