//! Small pieces of the server's API every other glue file uses: the clock,
//! error replies, keyspace events, map replies.

use std::ffi::CStr;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};

use crate::core::error::Error;

/// What `rm!` calls when the server lacks an API function: padlock needs
/// only functions every supported server has, so this cannot happen on one.
pub fn missing_api(name: &str) -> ! {
    eprintln!("padlock: the server lacks the module API {name}");
    std::process::abort()
}

/// The server's clock (unix ms), read once per command.
pub fn now_ms() -> i64 {
    // SAFETY: plain API call without arguments.
    unsafe { rm!(RedisModule_Milliseconds)() }
}

/// Turns a core error into its error reply.
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

/// Whether the server runs in cluster mode: fixed from start-up, so the
/// context's flags (a few hundred instructions) are read once.
pub fn cluster_enabled(ctx: &Context) -> bool {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static KNOWN: AtomicU8 = AtomicU8::new(0); // 0: not read yet, 1: no, 2: yes
    match KNOWN.load(Relaxed) {
        0 => {
            let on = ctx
                .get_flags()
                .contains(redis_module::ContextFlags::CLUSTER);
            KNOWN.store(if on { 2 } else { 1 }, Relaxed);
            on
        }
        known => known == 2,
    }
}

/// Whether the server is Valkey (it exports its API under `ValkeyModule_`
/// names too; Redis does not).
pub fn is_valkey() -> bool {
    let mut f: *mut std::os::raw::c_void = std::ptr::null_mut();
    // SAFETY: GetApi is set by the module's Init; it writes a function
    // pointer or nothing into `f`.
    unsafe {
        match redis_module::raw::RedisModule_GetApi {
            Some(get) => {
                get(
                    c"ValkeyModule_GetServerVersion".as_ptr(),
                    (&mut f as *mut *mut std::os::raw::c_void).cast(),
                ) == redis_module::raw::REDISMODULE_OK as i32
                    && !f.is_null()
            }
            None => false,
        }
    }
}

/// Valkey's own module options: `SKIP_COMMAND_VALIDATION` (1 << 4, Valkey
/// 8.1+: `Replicate` skips its command lookup by name; padlock replicates
/// only its own state commands and `DEL`) and
/// `HANDLE_ATOMIC_SLOT_MIGRATION` (1 << 5, Valkey 9+: padlock serves no
/// staged key of a slot it does not own, every effect touches one key, and
/// waiters of a slot that moved away are answered `-MOVED`). Older Valkeys
/// keep the bits and use none. Redis has other uses for these bits, so
/// they are set on Valkey only.
pub fn set_valkey_options(ctx: &Context, base: i32) {
    const SKIP_COMMAND_VALIDATION: i32 = 1 << 4;
    const HANDLE_ATOMIC_SLOT_MIGRATION: i32 = 1 << 5;
    // SAFETY: from OnLoad, with a live context.
    unsafe {
        rm!(RedisModule_SetModuleOptions)(
            ctx.ctx,
            base | SKIP_COMMAND_VALIDATION | HANDLE_ATOMIC_SLOT_MIGRATION,
        );
    }
}

/// Refuses an effect that came from neither the master link, the AOF
/// loader nor a slot migration's stream; the context's flags otherwise.
pub fn from_replication(ctx: &Context, args: &[RedisString]) -> Result<ContextFlags, Error> {
    let name = args.first().ok_or(Error::Arity)?;
    let flags = ctx.get_flags();
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        return Err(Error::EffectOnly(name.as_slice().to_vec()));
    }
    Ok(flags)
}
