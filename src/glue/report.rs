//! `INFO padlock`: counters since the module loaded and a few gauges.

use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::{raw, Context};

use super::fences;
use super::info::*;
use super::keep;
use super::types::{with_kinds, KindInfo, Value};
use super::waiting;

fn kinds() -> Vec<&'static KindInfo> {
    let mut kinds: Vec<&'static KindInfo> = Vec::new();
    macro_rules! each {
        ($($t:ty),*) => { $( kinds.push(<$t as Value>::INFO); )* };
    }
    with_kinds!(each);
    kinds
}

fn fields(for_crash_report: bool) -> Vec<(String, i64)> {
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed) as i64;
    let (blocked, mailed, (declared, blocked_edges)) = if for_crash_report {
        (-1, -1, (-1, -1))
    } else {
        waiting::gauges().unwrap_or((-1, -1, (-1, -1)))
    };
    let edges = if declared < 0 {
        -1
    } else {
        declared + blocked_edges
    };
    let mut out: Vec<(String, i64)> = Vec::with_capacity(48);
    let kinds = kinds();
    for k in &kinds {
        out.push((k.gauge.to_string(), k.values.load(Ordering::Relaxed)));
    }
    let keep_bound = if for_crash_report { -1 } else { keep::bound() };
    for (name, v) in [
        ("blocked_clients", blocked),
        ("mailbox_waiters", mailed),
        ("wait_edges", edges),
        ("wait_edges_declared", declared),
        ("wait_edges_blocked", blocked_edges),
        ("keep_bound", keep_bound),
    ] {
        out.push((name.to_string(), v));
    }
    for k in &kinds {
        for (name, field) in k.fields {
            out.push((format!("{}{name}", k.prefix), c(k.counters.get(*field))));
        }
    }
    let rest: [(&str, i64); 16] = [
        ("keep_renewals", c(&KEEP_RENEWALS)),
        ("keep_lost", c(&KEEP_LOST)),
        ("deadlocks", c(&DEADLOCKS)),
        ("deadlock_checks_too_big", c(&DEADLOCK_CHECKS_TOO_BIG)),
        ("timeouts", c(&TIMEOUTS)),
        ("handoffs", c(&HANDOFFS)),
        ("turned_away", c(&TURNED_AWAY)),
        ("cancelled", c(&CANCELLED)),
        ("mailbox_posts", c(&super::mailbox::POSTED)),
        ("mailbox_dropped", c(&super::mailbox::DROPPED)),
        ("evicted_held", c(&EVICTED_HELD)),
        (
            "eviction_safe",
            if for_crash_report {
                -1
            } else {
                i64::from(super::eviction::safe())
            },
        ),
        ("last_fence", fences::last() as i64),
        (
            "request_ids",
            if for_crash_report {
                -1
            } else {
                super::requests::remembered()
            },
        ),
        ("requests_replayed", c(&super::requests::REPLAYED)),
        (
            "request_ids_freed",
            if for_crash_report {
                -1
            } else {
                super::requests::remembered_freed()
            },
        ),
    ];
    out.extend(rest.into_iter().map(|(n, v)| (n.to_string(), v)));
    let grace = super::grace::fields(super::server::now_ms());
    out.extend(grace.into_iter().map(|(n, v)| (n.to_string(), v)));
    out
}

/// `wait_percentiles_usec_lock:p50=...,p99=...,p99.9=...` and the hold
/// line, per kind, as Redis' `latencystats` section writes its own.
fn percentile_lines() -> Vec<(String, String)> {
    let kinds = kinds();
    let mut out = Vec::with_capacity(2 * kinds.len());
    for k in &kinds {
        out.push((format!("wait_percentiles_usec_{}", k.short), k.waits.line()));
        out.push((format!("wait_buckets_usec_{}", k.short), k.waits.buckets()));
    }
    for k in &kinds {
        out.push((format!("hold_percentiles_usec_{}", k.short), k.holds.line()));
        out.push((format!("hold_buckets_usec_{}", k.short), k.holds.buckets()));
    }
    out
}

extern "C" fn info_func(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    super::guard::call((), || {
        let fields = fields(for_crash_report != 0);
        let lines = if for_crash_report != 0 {
            Vec::new()
        } else {
            percentile_lines()
        };
        // SAFETY: called by Redis with a live info context.
        unsafe {
            rm!(RedisModule_InfoAddSection)(ctx, std::ptr::null_mut());
            for (name, value) in fields {
                if let Ok(name) = CString::new(name) {
                    rm!(RedisModule_InfoAddFieldLongLong)(ctx, name.as_ptr(), value);
                }
            }
            for (name, value) in lines {
                if let (Ok(name), Ok(value)) = (CString::new(name), CString::new(value)) {
                    rm!(RedisModule_InfoAddFieldCString)(
                        ctx,
                        name.as_ptr(),
                        value.as_ptr() as *mut _,
                    );
                }
            }
        }
    })
}

/// `CONFIG RESETSTAT` clears the percentiles, as it clears Redis' own
/// latency statistics. Modules get no event for it, so a command filter
/// looks at every command for those two words (a count and, for commands
/// of two arguments, one comparison). It runs before Redis checks the
/// caller's ACL, so a `CONFIG RESETSTAT` refused to its caller clears them
/// too.
unsafe extern "C" fn reset_filter(f: *mut raw::RedisModuleCommandFilterCtx) {
    let arg = |i: c_int| -> &[u8] {
        // SAFETY: `f` is the live filter context, `i` below its count; a
        // filter's argument strings live while it runs.
        unsafe {
            let s = rm!(RedisModule_CommandFilterArgGet)(f, i);
            if s.is_null() {
                return &[];
            }
            redis_module::RedisString::string_as_slice(s)
        }
    };
    // SAFETY: `f` is the live filter context.
    if unsafe { rm!(RedisModule_CommandFilterArgsCount)(f) } != 2 {
        return;
    }
    if arg(0).eq_ignore_ascii_case(b"config") && arg(1).eq_ignore_ascii_case(b"resetstat") {
        super::guard::call((), || {
            for k in kinds() {
                k.waits.reset();
                k.holds.reset();
            }
        });
    }
}

pub fn register(ctx: &Context) {
    // SAFETY: called from OnLoad; replaces the info function registered by
    // `redis_module!`, which knows nothing of padlock's fields.
    unsafe {
        rm!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_func));
        rm!(RedisModule_RegisterCommandFilter)(
            ctx.ctx,
            Some(reset_filter),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        );
    }
}
