//! Eviction seen: a lock key is a key with an expiry, so an `allkeys-*` or
//! `volatile-*` `maxmemory-policy` can evict a held lock, and a second
//! client then acquires it. padlock cannot stop Redis from evicting, so it
//! makes it loud: a warning at load and at every change of the policy or of
//! `maxmemory`, `eviction_safe` in `INFO`, every evicted value counted,
//! logged and announced, and with `eviction refuse` no new grant while the
//! policy can evict.

use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::{raw, Context, ContextFlags, RedisString, RedisValue};

use super::blocking;
use super::config::EVICTION;
use super::guard;
use super::info;
use super::server::notify;
use super::types::KindInfo;
use crate::core::error::Error;
use crate::core::settings::Eviction;

/// Whether this server may evict padlock's keys now: `maxmemory` set with
/// a policy other than `noeviction` (a replica that ignores `maxmemory`
/// evicts nothing itself).
pub fn can_evict(ctx: &Context) -> bool {
    ctx.get_flags().contains(ContextFlags::EVICTED)
}

/// `maxmemory-policy` as the server reports it, for the messages.
fn policy(ctx: &Context) -> String {
    match ctx.call("CONFIG", &["GET", "maxmemory-policy"][..]) {
        Ok(RedisValue::Array(v)) => match v.get(1) {
            Some(RedisValue::SimpleString(s)) => s.clone(),
            Some(RedisValue::StringBuffer(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(RedisValue::BulkString(s)) => s.clone(),
            _ => "(unknown)".to_string(),
        },
        _ => "(unknown)".to_string(),
    }
}

/// With `eviction refuse`, no acquire is granted while the policy can
/// evict held locks. One atomic load with the default `warn`.
#[inline]
pub fn check_acquire(ctx: &Context) -> Result<(), Error> {
    if EVICTION.get() == Eviction::Refuse && can_evict(ctx) {
        return Err(Error::EvictionRefused(policy(ctx)));
    }
    Ok(())
}

/// Logs the warning when the policy in force can evict padlock's keys.
fn warn_if_unsafe(ctx: &Context) {
    if can_evict(ctx) {
        ctx.log_warning(&format!(
            "padlock: maxmemory-policy {} can evict held locks, semaphores and read-write \
             locks (a second client then acquires what is still held); use noeviction on \
             servers that hold locks, or set padlock.eviction refuse",
            policy(ctx)
        ));
    }
}

/// A context of padlock's own, for `INFO` (which runs without one).
static DETACHED: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());

/// `eviction_safe` of `INFO padlock`: 1 unless the policy can evict.
pub fn safe() -> bool {
    let ctx = DETACHED.load(Ordering::Relaxed);
    ctx.is_null() || !can_evict(&Context::new(ctx))
}

pub fn init(ctx: &Context) {
    DETACHED.store(blocking::detached_context(ctx), Ordering::Relaxed);
    warn_if_unsafe(ctx);
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_CONFIG, on_config_change);
}

unsafe extern "C" fn on_config_change(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE {
        return;
    }
    guard::call((), || {
        // SAFETY: for this event Redis passes a live RedisModuleConfigChange
        // whose names live until the callback returns.
        let names: &[*const c_char] = unsafe {
            match (data as *const raw::RedisModuleConfigChange).as_ref() {
                Some(c) if !c.config_names.is_null() => {
                    std::slice::from_raw_parts(c.config_names, c.num_changes as usize)
                }
                _ => &[],
            }
        };
        let relevant = names.iter().any(|&n| {
            // SAFETY: each name is a NUL-terminated string (see above).
            let n = unsafe { CStr::from_ptr(n) }.to_bytes();
            n.eq_ignore_ascii_case(b"maxmemory") || n.eq_ignore_ascii_case(b"maxmemory-policy")
        });
        if relevant {
            warn_if_unsafe(&Context::new(ctx));
        }
    })
}

thread_local! {
    /// When the last eviction line was written, and evictions since then
    /// not logged.
    static LOGGED: std::cell::Cell<(i64, u64)> = const { std::cell::Cell::new((i64::MIN, 0)) };
}

/// A held value was evicted: counted, logged with its key, announced.
/// An eviction storm writes one log line a second, not one per key: the
/// first key of the second is named, the rest counted in the next line
/// (every one is still counted in `evicted_held` and announced).
pub fn evicted(ctx: &Context, kind: &KindInfo, key: &[u8]) {
    info::bump(&info::EVICTED_HELD);
    let now = super::server::now_ms();
    let folded = LOGGED.with(|l| {
        let (at, folded) = l.get();
        if now.saturating_sub(at) < 1000 {
            l.set((at, folded + 1));
            None
        } else {
            l.set((now, 0));
            Some(folded)
        }
    });
    if let Some(folded) = folded {
        let more = if folded > 0 {
            format!(" ({folded} more held values evicted since the last such line)")
        } else {
            String::new()
        };
        ctx.log_warning(&format!(
            "padlock: eviction removed the held {} '{}' (maxmemory-policy {}): another client \
             may now acquire what its holder still believes it holds{more}",
            kind.name,
            crate::core::error::escape(key),
            policy(ctx)
        ));
    }
    notify(
        ctx,
        kind.evicted_event,
        &RedisString::create_from_slice(ctx.ctx, key),
    );
}
