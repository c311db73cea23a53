//! The one wrapper over Redis' raw API for blocked clients, timers, the
//! selected database and the flush event. Everything `unsafe` about
//! blocking lives here; `waiting` holds the logic.
//!
//! Clients are blocked without a Redis timeout: `waiting` runs the BLOCK
//! timeouts on its own timer, so the only hand that unblocks a waiter is
//! padlock's, exactly once, with its grant or with nil. (Redis 7.0 loses
//! the reply of a client granted in the same event-loop pass in which its
//! Redis timeout comes due.) The timeout callback remains for
//! `CLIENT UNBLOCK`, the disconnect callback for clients that go away.

use std::cell::Cell;
use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, Context, ContextFlags};

use super::waiting::{self, Undo};

/// A blocked client's handle, with the client's id.
pub struct Handle(*mut raw::RedisModuleBlockedClient, u64);

impl Handle {
    pub fn id(&self) -> usize {
        self.0 as usize
    }
}

/// What `wake` attaches to a blocked client: its reply, whether it was
/// sent, and how to take back a grant that never reached the client.
struct Wake {
    reply: Reply,
    sent: Cell<bool>,
    undo: Option<Undo>,
    client_id: u64,
}

/// What a woken waiter is told.
#[derive(Debug, Clone)]
pub enum Reply {
    Nil,
    Int(i64),
    Ints(Vec<i64>),
    Error(String),
}

fn send(ctx: *mut raw::RedisModuleCtx, reply: &Reply) {
    // SAFETY: ctx is the live context of the client being replied to.
    unsafe {
        match reply {
            Reply::Nil => {
                rm!(RedisModule_ReplyWithNull)(ctx);
            }
            Reply::Int(v) => {
                rm!(RedisModule_ReplyWithLongLong)(ctx, *v);
            }
            Reply::Ints(vs) => {
                rm!(RedisModule_ReplyWithArray)(ctx, vs.len() as _);
                for v in vs {
                    rm!(RedisModule_ReplyWithLongLong)(ctx, *v);
                }
            }
            Reply::Error(msg) => {
                let msg = CString::new(msg.replace('\0', " "))
                    .unwrap_or_else(|_| c"ERR padlock error".to_owned());
                rm!(RedisModule_ReplyWithError)(ctx, msg.as_ptr());
            }
        }
    }
}

fn wake_of(ctx: *mut raw::RedisModuleCtx) -> Option<&'static Wake> {
    // SAFETY: the private data is null or a Box<Wake> from `wake`, kept
    // alive by Redis until `free_wake`.
    unsafe { (rm!(RedisModule_GetBlockedClientPrivateData)(ctx) as *const Wake).as_ref() }
}

fn deliver(ctx: *mut raw::RedisModuleCtx, w: &Wake) {
    send(ctx, &w.reply);
    w.sent.set(true);
}

fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("padlock: internal error in a blocking callback");
    }
}

unsafe extern "C" fn on_reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    guarded(|| match wake_of(ctx) {
        Some(w) => deliver(ctx, w),
        None => send(ctx, &Reply::Nil),
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
        send(ctx, &Reply::Nil);
        let bc = rm!(RedisModule_GetBlockedClientHandle)(ctx);
        if waiting::forget(bc as usize) {
            rm!(RedisModule_UnblockClient)(bc, ptr::null_mut());
        }
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn on_disconnect(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    guarded(|| {
        if wake_of(ctx).is_none() && waiting::forget(bc as usize) {
            rm!(RedisModule_UnblockClient)(bc, ptr::null_mut());
        }
    });
}

/// Redis is done with the client. A grant it never sent (the client went
/// away, or Redis 7.0 dropped the reply because `CLIENT UNBLOCK` hit the
/// client in the pass it was granted) is taken back, and the client is
/// disconnected so that it does not wait forever for a reply.
unsafe extern "C" fn free_wake(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    let w = Box::from_raw(data as *mut Wake);
    if !w.sent.get() {
        if let Some(undo) = w.undo {
            guarded(|| waiting::lost(undo, w.client_id));
        }
    }
}

/// Blocks the client running the current command until `wake`.
pub fn block(ctx: &Context) -> Handle {
    // SAFETY: called from a command that may block (see `can_block`).
    unsafe {
        let bc = rm!(RedisModule_BlockClient)(
            ctx.ctx,
            Some(on_reply),
            Some(on_timeout),
            Some(free_wake),
            0,
        );
        rm!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect));
        Handle(bc, rm!(RedisModule_GetClientId)(ctx.ctx))
    }
}

/// Wakes a waiter with its reply (a grant, nil, or an error); `undo` takes
/// the grant back should the reply never reach the client.
pub fn wake(h: Handle, reply: Reply, undo: Option<Undo>) {
    let wake = Wake {
        reply,
        sent: Cell::new(false),
        undo,
        client_id: h.1,
    };
    let data = Box::into_raw(Box::new(wake)) as *mut c_void;
    // SAFETY: the handle came from `block` and was taken out of the queues,
    // so this is its one unblock.
    unsafe {
        rm!(RedisModule_UnblockClient)(h.0, data);
    }
}

/// Disconnects a client (one that lost its reply, see `free_wake`).
pub fn kill_client(ctx: &Context, id: u64) {
    let id = id.to_string();
    let _ = ctx.call("CLIENT", &["KILL", "ID", id.as_str()]);
}

/// False inside MULTI, Lua and module calls: `BLOCK` then acts as absent.
pub fn can_block(ctx: &Context) -> bool {
    !ctx.get_flags()
        .intersects(ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING)
}

/// Timers fire on replicas too; only a master may grant.
pub fn is_master(ctx: &Context) -> bool {
    ctx.get_flags().contains(ContextFlags::MASTER)
}

/// May padlock write now from outside a client's command (a timer)? Not on
/// a replica, not while loading, and not while writes are paused
/// (`CLIENT PAUSE WRITE|ALL`, `FAILOVER`, `CLUSTER FAILOVER`): Redis then
/// keeps expired keys in place, and a write to one, or an effect
/// propagated, trips its assertions. Such work waits for the pause to end.
pub fn may_write(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    // SAFETY: plain API call without arguments.
    let paused = unsafe { rm!(RedisModule_AvoidReplicaTraffic)() } != 0;
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING) && !paused
}

pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: live context.
    unsafe { rm!(RedisModule_GetSelectedDb)(ctx.ctx) }
}

/// Runs `f` with database `db` selected, then selects the previous one
/// again (in a command, the selection would otherwise stick to the client).
pub fn in_db<R>(ctx: &Context, db: i32, f: impl FnOnce() -> R) -> R {
    let before = selected_db(ctx);
    if before == db {
        return f();
    }
    // SAFETY: live context; `db` was a valid database when it was recorded.
    unsafe {
        rm!(RedisModule_SelectDb)(ctx.ctx, db);
    }
    let r = f();
    // SAFETY: as above.
    unsafe {
        rm!(RedisModule_SelectDb)(ctx.ctx, before);
    }
    r
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    guarded(|| waiting::on_timer(&Context::new(ctx)));
}

/// A one-shot timer calling `waiting::on_timer`.
pub fn start_timer(ctx: &Context, delay_ms: i64) -> u64 {
    // SAFETY: live context; no data is attached.
    unsafe {
        rm!(RedisModule_CreateTimer)(ctx.ctx, delay_ms.max(0), Some(on_timer), ptr::null_mut())
    }
}

pub fn stop_timer(ctx: &Context, id: u64) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: stopping an unknown id is a harmless error.
    unsafe {
        rm!(RedisModule_StopTimer)(ctx.ctx, id, &mut data);
    }
}

unsafe extern "C" fn on_flush(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        guarded(waiting::on_flush);
    }
}

/// FLUSHDB / FLUSHALL free every lock without per-key callbacks.
pub fn subscribe_flush(ctx: &Context) {
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_FLUSHDB,
        dataver: 1,
    };
    // SAFETY: called once from OnLoad.
    unsafe {
        rm!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event, Some(on_flush));
    }
}
