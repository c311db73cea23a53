//! The Redis side: parse, open keys, call the core, reply, replicate.

/// A Redis module API function pointer. All the ones padlock uses exist
/// from Redis 7.0 on; a server without one cannot have loaded the module.
macro_rules! rm {
    ($name:ident) => {
        // Used inside `unsafe` blocks only: the API table is written once,
        // at load, before any command or callback runs.
        match redis_module::raw::$name {
            Some(f) => f,
            None => $crate::glue::missing_api(stringify!($name)),
        }
    };
}

pub mod alloc;
mod blocking;
pub mod commands;
pub mod config;
pub mod info;
mod key;
mod replicate;
pub mod types;
mod waiting;

use std::ffi::CStr;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{
    Context, NotifyEvent, RedisError, RedisResult, RedisString, RedisValue, Status,
};

use crate::core::args::Arg;
use crate::core::error::Error;

impl Arg for RedisString {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

pub fn missing_api(name: &str) -> ! {
    eprintln!("padlock: the server lacks the module API {name}");
    std::process::abort()
}

/// The server's clock, read once per command.
pub fn now_ms() -> i64 {
    // SAFETY: plain API call without arguments.
    unsafe { rm!(RedisModule_Milliseconds)() }
}

/// Runs a command body and turns a core error into its error reply.
pub fn reply(result: Result<RedisValue, Error>) -> RedisResult {
    result.map_err(|e| match e {
        Error::Arity => RedisError::WrongArity,
        e => RedisError::String(e.message()),
    })
}

/// A keyspace event of the module class (`notify-keyspace-events` `d`).
pub fn notify(ctx: &Context, event: &CStr, key: &RedisString) {
    // SAFETY: live context and key; the event name is a static C string.
    unsafe {
        rm!(RedisModule_NotifyKeyspaceEvent)(
            ctx.ctx,
            redis_module::raw::REDISMODULE_NOTIFY_MODULE,
            event.as_ptr(),
            key.inner,
        );
    }
}

/// A reply of named fields: a map in RESP3, a flat array in RESP2.
pub fn map(fields: Vec<(&str, RedisValue)>) -> RedisValue {
    RedisValue::OrderedMap(
        fields
            .into_iter()
            .map(|(k, v)| (RedisValueKey::String(k.to_string()), v))
            .collect(),
    )
}

/// The server-wide fencing-token counter.
pub mod fences {
    use std::sync::Mutex;

    use crate::core::fence::FenceCounter;

    static COUNTER: Mutex<FenceCounter> = Mutex::new(FenceCounter::new());

    pub fn with<R>(f: impl FnOnce(&mut FenceCounter) -> R) -> R {
        let mut c = COUNTER.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c)
    }

    pub fn observe(fence: u64) {
        with(|c| c.observe(fence))
    }

    pub fn last() -> u64 {
        with(|c| c.last())
    }
}

/// Called when a lock or semaphore key is removed by another hand (DEL,
/// UNLINK, expiry, eviction).
pub fn on_foreign_unlink(key: &[u8], _kind: types::ValueKind) {
    waiting::on_unlink(key);
}

/// Keyspace events `expired` / `evicted`: a lease that ran out with the key.
pub fn on_key_event(ctx: &Context, event: NotifyEvent, _name: &str, key: &[u8]) {
    let Some(kind) = types::take_unlinked(key) else {
        return;
    };
    if event.contains(NotifyEvent::EXPIRED) {
        info::bump(&info::EXPIRED);
        let name = match kind {
            types::ValueKind::Lock => c"lock.expired",
            types::ValueKind::Sem => c"sem.expired",
        };
        let key = RedisString::create_from_slice(ctx.ctx, key);
        notify(ctx, name, &key);
    }
}

/// Keyspace events of the generic class: a lock's lease moved by hand
/// (`PEXPIRE`, `EXPIREAT`, ...) must move the hand-off timer of its waiters.
pub fn on_generic_event(_ctx: &Context, _event: NotifyEvent, name: &str, key: &[u8]) {
    if name == "expire" {
        waiting::on_unlink(key);
    }
}

pub fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    std::panic::set_hook(Box::new(|p| {
        eprintln!("padlock: internal error (panic): {p}");
    }));
    config::LOADED_MS.store(now_ms(), std::sync::atomic::Ordering::Relaxed);
    // HANDLE_IO_ERRORS: a damaged RESTORE payload or RDB file makes a load
    // fail (and be refused) instead of aborting the server.
    ctx.set_module_options(
        redis_module::raw::ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED
            | redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS,
    );
    commands::set_acl_categories(ctx);
    waiting::init(ctx);
    info::register(ctx);
    Status::Ok
}
