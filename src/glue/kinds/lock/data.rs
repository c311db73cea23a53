//! The lock type (`pdlk-lock`): holder, reentry count, fence; the lease is
//! the key's own expiry.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::AtomicI64;

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::core::lock::Lock;
use crate::core::since::Since;
use crate::core::stored::Invalid;
use crate::core::waitgraph::Held;
use crate::glue::fences;
use crate::glue::guard;
use crate::glue::percentiles::Percentiles;
use crate::glue::types::*;

pub static LOCK_TYPE: RedisType = RedisType::new(
    "pdlk-lock",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: TYPE_METHOD_VERSION,
        rdb_load: Some(lock_rdb_load),
        rdb_save: Some(lock_rdb_save),
        aof_rewrite: Some(lock_aof_rewrite),
        mem_usage: Some(lock_mem_usage),
        digest: None,
        free: Some(free_value::<Lock>),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: raw::Aux::Before as i32 | raw::Aux::After as i32,
        free_effort: None,
        unlink: None,
        copy: Some(copy_value::<Lock>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: Some(unlink2::<Lock>),
        copy2: None,
        aux_save2: None,
    },
);

pub static LOCK_INFO: KindInfo = KindInfo {
    name: "lock",
    short: "lock",
    all_conflict: true,
    gauge: "locks",
    values: AtomicI64::new(0),
    prefix: "",
    fields: &[("acquired", Field::Acquired), ("reentered", Field::Reentered), ("released", Field::Released), ("extended", Field::Extended), ("contended", Field::Contended), ("expired", Field::Expired)],
    counters: Counters::new(),
    acquire_event: c"lock.acquire",
    release_event: c"lock.release",
    expired_event: c"lock.expired",
    evicted_event: c"lock.evicted",
    state_command: c"padlock.lockset",
    state_syntax: "key holder count fence deadline-ms [ID request]",
    state_summary: "State command (replication stream and AOF only): sets a lock's state as replicas and the AOF receive it.",
    state_complexity: "O(1)",
    waits: Percentiles::waits(0),
    holds: Percentiles::holds(0),
};

extern "C" fn lock_rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard::call(std::ptr::null_mut(), || {
        let load = || -> Result<Lock, Invalid> {
            known_encoding(encver)?;
            let holder = raw::load_string_buffer(rdb).map_err(|_| SHORT)?;
            let count = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
            let fence = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
            crate::core::lock::stored::lock(holder.as_ref(), count, fence)
        };
        match load() {
            Ok(lock) => {
                fences::observe(lock.fence);
                into_raw(lock)
            }
            Err(why) => refuse(rdb, "pdlk-lock", why),
        }
    })
}

extern "C" fn lock_rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard::call((), || {
        // SAFETY: Redis hands back a pointer made by `into_raw::<Lock>`.
        let lock = unsafe { &*(value as *const Lock) };
        raw::save_slice(rdb, &lock.holder);
        raw::save_unsigned(rdb, u64::from(lock.count));
        raw::save_unsigned(rdb, lock.fence);
    })
}

extern "C" fn lock_aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard::call((), || {
        emit_floor(aof);
        // SAFETY: as above.
        let lock = unsafe { &*(value as *const Lock) };
        // Deadline 0: Redis emits the key's PEXPIREAT right after this command.
        emit(
            aof,
            Lock::INFO.state_command,
            key,
            &lock.holder,
            &[lock.count as i64, lock.fence as i64, 0],
        );
        emit_ids(aof, key);
    })
}

extern "C" fn lock_mem_usage(value: *const c_void) -> usize {
    guard::call(0, || {
        // SAFETY: as above.
        let lock = unsafe { &*(value as *const Lock) };
        std::mem::size_of::<Lock>() + lock.holder.len()
    })
}

impl Value for Lock {
    const TYPE: &'static RedisType = &LOCK_TYPE;
    const INFO: &'static KindInfo = &LOCK_INFO;
}

impl Stored for Lock {
    fn held_alike(&self) -> bool {
        LOCK_INFO.all_conflict
    }

    fn held(&self, _now_ms: i64) -> Held {
        Held::all(vec![self.holder.to_vec()])
    }

    fn each_holder(&self, _now_ms: i64, f: &mut dyn FnMut(&[u8])) {
        f(&self.holder)
    }

    fn frees_at(&self, key_expire: Option<i64>) -> Option<i64> {
        key_expire
    }

    fn spans(&self) -> Vec<(Since, i64)> {
        // Nothing to count (nor allocate) for a lock loaded or replicated.
        if self.since == Since::UNKNOWN {
            Vec::new()
        } else {
            vec![(self.since, 0)]
        }
    }
}
