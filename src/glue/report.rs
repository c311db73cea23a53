//! `INFO padlock`: counters since the module loaded and a few gauges.

use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use redis_module::{raw, Context};

use super::fences;
use super::info::*;
use super::keep;
use super::waiting;

fn fields(for_crash_report: bool) -> Vec<(&'static str, i64)> {
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed) as i64;
    let g = |a: &AtomicI64| a.load(Ordering::Relaxed);
    let (blocked, edges) = if for_crash_report {
        (-1, -1)
    } else {
        waiting::gauges().unwrap_or((-1, -1))
    };
    vec![
        ("locks", g(&LOCKS)),
        ("semaphores", g(&SEMAPHORES)),
        ("rwlocks", g(&RWLOCKS)),
        ("blocked_clients", blocked),
        ("wait_edges", edges),
        (
            "keep_bound",
            if for_crash_report { -1 } else { keep::bound() },
        ),
        ("acquired", c(&ACQUIRED)),
        ("reentered", c(&REENTERED)),
        ("released", c(&RELEASED)),
        ("extended", c(&EXTENDED)),
        ("contended", c(&CONTENDED)),
        ("expired", c(&EXPIRED)),
        ("sem_acquired", c(&SEM_ACQUIRED)),
        ("sem_released", c(&SEM_RELEASED)),
        ("sem_extended", c(&SEM_EXTENDED)),
        ("sem_contended", c(&SEM_CONTENDED)),
        ("sem_expired", c(&SEM_EXPIRED)),
        ("sem_expired_holders", c(&SEM_EXPIRED_HOLDERS)),
        ("rw_acquired", c(&RW_ACQUIRED)),
        ("rw_released", c(&RW_RELEASED)),
        ("rw_extended", c(&RW_EXTENDED)),
        ("rw_contended", c(&RW_CONTENDED)),
        ("rw_expired", c(&RW_EXPIRED)),
        ("rw_expired_holders", c(&RW_EXPIRED_HOLDERS)),
        ("keep_renewals", c(&KEEP_RENEWALS)),
        ("keep_lost", c(&KEEP_LOST)),
        ("deadlocks", c(&DEADLOCKS)),
        ("deadlock_checks_too_big", c(&DEADLOCK_CHECKS_TOO_BIG)),
        ("timeouts", c(&TIMEOUTS)),
        ("handoffs", c(&HANDOFFS)),
        ("turned_away", c(&TURNED_AWAY)),
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
    ]
}

extern "C" fn info_func(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    super::guard::call((), || {
        let fields = fields(for_crash_report != 0);
        // SAFETY: called by Redis with a live info context.
        unsafe {
            rm!(RedisModule_InfoAddSection)(ctx, std::ptr::null_mut());
            for (name, value) in fields {
                if let Ok(name) = CString::new(name) {
                    rm!(RedisModule_InfoAddFieldLongLong)(ctx, name.as_ptr(), value);
                }
            }
        }
    })
}

pub fn register(ctx: &Context) {
    // SAFETY: called from OnLoad; replaces the info function registered by
    // `redis_module!`, which knows nothing of padlock's fields.
    unsafe {
        rm!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_func));
    }
}
