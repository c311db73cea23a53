//! The blocked clients' callbacks. Clients are blocked without a Redis
//! timeout: the engine runs BLOCK timeouts on its own timer, so the only
//! hand that unblocks a waiter is padlock's, exactly once, with its grant
//! or with nil. (Redis 7.0 loses the reply of a client granted in the same
//! event-loop pass in which its Redis timeout comes due.) The timeout
//! callback remains for `CLIENT UNBLOCK`, the disconnect callback for
//! clients that go away.

use std::cell::Cell;
use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context};

use super::super::blocking::{self, Callbacks, Handle, Reply};
use super::recover::{self, Undo};
use super::state;
use super::timer;

/// What `wake` attaches to a blocked client: its reply, whether it was
/// sent, and how to take back a grant that never reached the client.
struct Wake {
    reply: Reply,
    sent: Cell<bool>,
    undo: Option<Undo>,
    client_id: u64,
}

pub fn guarded(f: impl FnOnce()) {
    super::super::guard::call((), f)
}

fn wake_of(ctx: *mut raw::RedisModuleCtx) -> Option<&'static Wake> {
    // SAFETY: the private data is null or a Box<Wake> from `wake`, kept
    // alive by Redis until `free_wake`.
    unsafe { (blocking::private_data(ctx) as *const Wake).as_ref() }
}

fn deliver(ctx: *mut raw::RedisModuleCtx, w: &Wake) {
    blocking::send(ctx, &w.reply);
    w.sent.set(true);
}

unsafe extern "C" fn on_reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    guarded(|| match wake_of(ctx) {
        Some(w) => deliver(ctx, w),
        None => blocking::send(ctx, &Reply::Nil),
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // Only `CLIENT UNBLOCK` gets here (no Redis timeout is set).
    guarded(|| {
        if let Some(w) = wake_of(ctx) {
            // Woken by padlock in this same pass: that reply stands.
            deliver(ctx, w);
            return;
        }
        blocking::send(ctx, &Reply::Nil);
        let bc = blocking::handle_of(ctx);
        if forget(bc as usize) {
            blocking::unblock_raw(bc);
        }
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn on_disconnect(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    guarded(|| {
        if wake_of(ctx).is_none() && forget(bc as usize) {
            blocking::unblock_raw(bc);
        }
    });
}

/// Redis is done with the client. A grant it never sent is taken back.
unsafe extern "C" fn free_wake(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: the private data is a Box<Wake> from `wake`, freed once.
    let w = unsafe { Box::from_raw(data as *mut Wake) };
    if !w.sent.get() {
        if let Some(undo) = w.undo {
            guarded(|| recover::lost(undo, w.client_id));
        }
    }
}

const CALLBACKS: Callbacks = Callbacks {
    reply: on_reply,
    timeout: on_timeout,
    free: free_wake,
    disconnect: on_disconnect,
};

pub fn block(ctx: &Context) -> Handle {
    blocking::block(ctx, &CALLBACKS)
}

/// Wakes a waiter with its reply (a grant, nil, or an error); `undo` takes
/// the grant back should the reply never reach the client.
pub fn wake(h: Handle, reply: Reply, undo: Option<Undo>) {
    let wake = Wake {
        reply,
        sent: Cell::new(false),
        undo,
        client_id: h.client_id(),
    };
    blocking::unblock(h, Box::into_raw(Box::new(wake)) as *mut c_void);
}

/// A blocked client was unblocked (`CLIENT UNBLOCK`) or disconnected: it
/// leaves the queues and the graph now; the keys it was queued on are
/// served at once by the timer (whoever was behind it may be first now).
/// False when the client was not waiting any more.
fn forget(handle: usize) -> bool {
    let keys = state::with(|s| {
        let id = s.waiters.by_handle(handle)?;
        let (keys, e) = s.take(id)?;
        s.graph.remove_blocked(&e.payload.holder, id);
        Some(keys)
    });
    let Some(keys) = keys else {
        return false;
    };
    timer::note(keys.into_iter().map(|k| k.name));
    true
}
