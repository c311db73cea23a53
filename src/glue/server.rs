//! Small pieces of the server's API every other glue file uses: the clock,
//! error replies, keyspace events, map replies.

use std::ffi::CStr;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

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
