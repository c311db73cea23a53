//! Thin wrappers over Redis' raw API for blocked clients, timers, the
//! selected database and server events. Everything `unsafe` about them
//! lives here; what the callbacks do is the waiting engine's (it passes
//! them in), so this file knows nothing of padlock's rules.

use std::cell::Cell;
use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::{raw, Context, ContextFlags};

/// A blocked client's handle, with the client's id.
pub struct Handle(*mut raw::RedisModuleBlockedClient, u64);

impl Handle {
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    pub fn client_id(&self) -> u64 {
        self.1
    }
}

/// What a woken waiter is told.
#[derive(Debug, Clone)]
pub enum Reply {
    Nil,
    Int(i64),
    Ints(Vec<i64>),
    Error(String),
}

pub type ReplyProc = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;
pub type FreeProc = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void);
pub type DisconnectProc =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut raw::RedisModuleBlockedClient);
pub type TimerProc = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void);
pub type EventProc =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// The callbacks of a blocked client.
pub struct Callbacks {
    pub reply: ReplyProc,
    pub timeout: ReplyProc,
    pub free: FreeProc,
    pub disconnect: DisconnectProc,
}

pub fn send(ctx: *mut raw::RedisModuleCtx, reply: &Reply) {
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

/// Blocks the client running the current command, without a Redis
/// timeout (padlock runs BLOCK timeouts itself).
pub fn block(ctx: &Context, cb: &Callbacks) -> Handle {
    // SAFETY: called from a command that may block (see `can_block`).
    unsafe {
        let bc = rm!(RedisModule_BlockClient)(
            ctx.ctx,
            Some(cb.reply),
            Some(cb.timeout),
            Some(cb.free),
            0,
        );
        rm!(RedisModule_SetDisconnectCallback)(bc, Some(cb.disconnect));
        Handle(bc, rm!(RedisModule_GetClientId)(ctx.ctx))
    }
}

/// Unblocks a client with `data` as its private data (freed by the free
/// callback); each handle is unblocked exactly once.
pub fn unblock(h: Handle, data: *mut c_void) {
    // SAFETY: the handle came from `block` and its owner gives it up here.
    unsafe {
        rm!(RedisModule_UnblockClient)(h.0, data);
    }
}

/// Unblocks by raw handle, with no private data (timeout/disconnect paths).
pub fn unblock_raw(bc: *mut raw::RedisModuleBlockedClient) {
    // SAFETY: a handle Redis gave to a callback of this blocked client.
    unsafe {
        rm!(RedisModule_UnblockClient)(bc, ptr::null_mut());
    }
}

/// The private data given at unblock, inside a reply/timeout callback.
pub fn private_data(ctx: *mut raw::RedisModuleCtx) -> *mut c_void {
    // SAFETY: called from a blocked client's callback with its context.
    unsafe { rm!(RedisModule_GetBlockedClientPrivateData)(ctx) }
}

/// The blocked client's handle, inside its timeout callback.
pub fn handle_of(ctx: *mut raw::RedisModuleCtx) -> *mut raw::RedisModuleBlockedClient {
    // SAFETY: called from a blocked client's callback with its context.
    unsafe { rm!(RedisModule_GetBlockedClientHandle)(ctx) }
}

/// Disconnects a client (one that lost its reply).
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

/// How soon a timer looks again while writes are paused (`CLIENT PAUSE
/// WRITE`, loading): both timers (hand-off and `KEEP`) wait the same.
pub const PAUSED_POLL_MS: i64 = 10;

/// A module timer kept on the earliest time it is asked for: arming it
/// later than it is armed does nothing, earlier moves it. Callbacks without
/// a context of their own arm it through a detached one made at load.
pub struct OneShot {
    armed: Cell<Option<(u64, i64)>>,
    ctx: Cell<*mut raw::RedisModuleCtx>,
    fire: Cell<Option<TimerProc>>,
}

impl OneShot {
    pub const fn new() -> OneShot {
        OneShot {
            armed: Cell::new(None),
            ctx: Cell::new(ptr::null_mut()),
            fire: Cell::new(None),
        }
    }

    /// From OnLoad: the callback and a context that lives with the module.
    pub fn init(&self, ctx: &Context, fire: TimerProc) {
        self.ctx.set(detached_context(ctx));
        self.fire.set(Some(fire));
    }

    /// Makes sure the timer fires at `at` (unix ms) or earlier.
    pub fn arm(&self, at: i64) {
        let (Some(fire), ctx) = (self.fire.get(), Context::new(self.ctx.get())) else {
            return;
        };
        if ctx.ctx.is_null() {
            return;
        }
        if let Some((id, when)) = self.armed.get() {
            if when <= at {
                return;
            }
            stop_timer(&ctx, id);
        }
        let id = start_timer(&ctx, at - super::server::now_ms(), fire);
        self.armed.set(Some((id, at)));
    }

    /// The timer fired: it is no longer armed.
    pub fn fired(&self) {
        self.armed.set(None);
    }
}

fn start_timer(ctx: &Context, delay_ms: i64, cb: TimerProc) -> u64 {
    // SAFETY: live context; no data is attached.
    unsafe { rm!(RedisModule_CreateTimer)(ctx.ctx, delay_ms.max(0), Some(cb), ptr::null_mut()) }
}

fn stop_timer(ctx: &Context, id: u64) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: stopping an unknown id is a harmless error.
    unsafe {
        rm!(RedisModule_StopTimer)(ctx.ctx, id, &mut data);
    }
}

/// Subscribes `cb` to a server event (from OnLoad).
pub fn subscribe(ctx: &Context, id: u64, cb: EventProc) {
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: called once from OnLoad.
    unsafe {
        rm!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event, Some(cb));
    }
}

/// A context for timers armed from callbacks that have none: lives as long
/// as the module.
pub fn detached_context(ctx: &Context) -> *mut raw::RedisModuleCtx {
    // SAFETY: called from OnLoad.
    unsafe { rm!(RedisModule_GetDetachedThreadSafeContext)(ctx.ctx) }
}
