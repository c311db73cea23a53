//! The two data types and their callbacks: persistence (RDB with absolute
//! holder deadlines, AOF rewrite as the same effect commands replication
//! uses), `COPY`, `MEMORY USAGE`, and the unlink hook that tells padlock a
//! lock or semaphore key went away by some other hand than its own.

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::AtomicI64;

use redis_module::native_types::RedisType;
use redis_module::raw;

use super::fences;
use super::info::{gauge, LOCKS, SEMAPHORES};
use crate::core::lock::Lock;
use crate::core::semaphore::Semaphore;
use crate::core::stored::{self, Invalid};

const ENCODING_VERSION: i32 = 1;
/// The type-methods layout of Redis 7.0 (copy, unlink, mem_usage2...): the
/// oldest server padlock supports reads exactly the fields set here.
const TYPE_METHOD_VERSION: u64 = 4;

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
        aux_save_triggers: raw::Aux::Before as i32,
        free_effort: None,
        unlink: Some(unlink_lock),
        copy: Some(copy_value::<Lock>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

pub static SEM_TYPE: RedisType = RedisType::new(
    "pdlk-sema",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: TYPE_METHOD_VERSION,
        rdb_load: Some(sem_rdb_load),
        rdb_save: Some(sem_rdb_save),
        aof_rewrite: Some(sem_aof_rewrite),
        mem_usage: Some(sem_mem_usage),
        digest: None,
        free: Some(free_value::<Semaphore>),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: Some(unlink_sem),
        copy: Some(copy_value::<Semaphore>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

// ---- unlink tracking ------------------------------------------------------

thread_local! {
    static ON_PURPOSE: Cell<bool> = const { Cell::new(false) };
    /// The last lock/semaphore key removed by someone else (DEL, expiry,
    /// eviction): the expired-event handler matches it to count expired
    /// leases, the blocking layer to serve the key's waiters.
    static LAST_UNLINKED: RefCell<Option<(Vec<u8>, ValueKind)>> = const { RefCell::new(None) };
}

/// Runs `f` (a delete padlock itself does) without it counting as a removal
/// by another hand.
pub fn deleting_on_purpose(f: impl FnOnce()) {
    ON_PURPOSE.with(|p| p.set(true));
    f();
    ON_PURPOSE.with(|p| p.set(false));
}

/// Which of padlock's types a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Lock,
    Sem,
}

/// Takes the key last removed by another hand, when it is `key`.
pub fn take_unlinked(key: &[u8]) -> Option<ValueKind> {
    LAST_UNLINKED.with(|l| {
        let mut l = l.borrow_mut();
        match l.take() {
            Some((name, kind)) if name == key => Some(kind),
            other => {
                *l = other;
                None
            }
        }
    })
}

fn unlinked(key: *mut raw::RedisModuleString, kind: ValueKind) {
    if ON_PURPOSE.with(|p| p.get()) {
        return;
    }
    let name = redis_module::RedisString::string_as_slice(key).to_vec();
    super::on_foreign_unlink(&name, kind);
    LAST_UNLINKED.with(|l| *l.borrow_mut() = Some((name, kind)));
}

extern "C" fn unlink_lock(key: *mut raw::RedisModuleString, _value: *const c_void) {
    unlinked(key, ValueKind::Lock)
}

extern "C" fn unlink_sem(key: *mut raw::RedisModuleString, _value: *const c_void) {
    unlinked(key, ValueKind::Sem)
}

// ---- fence counter in the RDB ---------------------------------------------

extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    raw::save_unsigned(rdb, fences::last());
}

extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, _encver: c_int, _when: c_int) -> c_int {
    match raw::load_unsigned(rdb).map_err(|_| SHORT).and_then(stored::fence_counter) {
        Ok(v) => {
            fences::observe(v);
            raw::Status::Ok as c_int
        }
        Err(why) => {
            refuse(rdb, "fence counter", why);
            raw::Status::Err as c_int
        }
    }
}

// ---- refusing damaged data -------------------------------------------------

const SHORT: Invalid = "data ends early or cannot be read";

fn known_encoding(encver: c_int) -> Result<(), Invalid> {
    if encver == ENCODING_VERSION {
        Ok(())
    } else {
        Err("unknown encoding version (saved by a newer padlock?)")
    }
}

/// Logs why a stored value was refused and gives Redis nothing: `RESTORE`
/// then answers an error, an RDB load stops with Redis' own report, and no
/// part of the value is left behind.
fn refuse(rdb: *mut raw::RedisModuleIO, what: &str, why: Invalid) -> *mut c_void {
    if let Ok(msg) = CString::new(format!("padlock: refused a damaged {what} value: {why}")) {
        // SAFETY: live IO handle; the format takes exactly one string.
        unsafe {
            rm!(RedisModule_LogIOError)(rdb, c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
    std::ptr::null_mut()
}

// ---- locks ----------------------------------------------------------------

extern "C" fn lock_rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let load = || -> Result<Lock, Invalid> {
        known_encoding(encver)?;
        let holder = raw::load_string_buffer(rdb).map_err(|_| SHORT)?;
        let count = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
        let fence = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
        stored::lock(holder.as_ref(), count, fence)
    };
    match load() {
        Ok(lock) => {
            fences::observe(lock.fence);
            into_raw(lock)
        }
        Err(why) => refuse(rdb, "pdlk-lock", why),
    }
}

extern "C" fn lock_rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis hands back a pointer made by `into_raw::<Lock>`.
    let lock = unsafe { &*(value as *const Lock) };
    raw::save_slice(rdb, &lock.holder);
    raw::save_unsigned(rdb, lock.count);
    raw::save_unsigned(rdb, lock.fence);
}

extern "C" fn lock_aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: as above.
    let lock = unsafe { &*(value as *const Lock) };
    // Deadline 0: Redis emits the key's PEXPIREAT right after this command.
    emit(
        aof,
        super::replicate::LOCKSET,
        key,
        &lock.holder,
        &[lock.count as i64, lock.fence as i64, 0],
    );
}

extern "C" fn lock_mem_usage(value: *const c_void) -> usize {
    // SAFETY: as above.
    let lock = unsafe { &*(value as *const Lock) };
    std::mem::size_of::<Lock>() + lock.holder.len()
}

/// One of padlock's two value types: its Redis data type and its `INFO`
/// gauge. Every value Redis holds is a `Box<T>` made by `into_raw`.
pub trait Value: Clone + 'static {
    const TYPE: &'static RedisType;
    const GAUGE: &'static AtomicI64;
}

impl Value for Lock {
    const TYPE: &'static RedisType = &LOCK_TYPE;
    const GAUGE: &'static AtomicI64 = &LOCKS;
}

impl Value for Semaphore {
    const TYPE: &'static RedisType = &SEM_TYPE;
    const GAUGE: &'static AtomicI64 = &SEMAPHORES;
}

/// Hands a value to Redis (counted in its gauge until `free_value`).
pub fn into_raw<T: Value>(value: T) -> *mut c_void {
    gauge(T::GAUGE, 1);
    Box::into_raw(Box::new(value)).cast()
}

extern "C" fn free_value<T: Value>(value: *mut c_void) {
    // SAFETY: the pointer came from Box::into_raw of a T, and Redis frees
    // each value once.
    drop(unsafe { Box::from_raw(value as *mut T) });
    gauge(T::GAUGE, -1);
}

extern "C" fn copy_value<T: Value>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: Redis hands back a pointer it got from a Box<T>.
    let v = unsafe { &*(value as *const T) };
    into_raw(v.clone())
}

// ---- semaphores -----------------------------------------------------------

extern "C" fn sem_rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let load = || -> Result<Semaphore, Invalid> {
        known_encoding(encver)?;
        let limit = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
        let n = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
        let mut sem = stored::SemaphoreLoader::new(limit, n)?;
        for _ in 0..n {
            let holder = raw::load_string_buffer(rdb).map_err(|_| SHORT)?;
            let permits = raw::load_unsigned(rdb).map_err(|_| SHORT)?;
            let deadline = raw::load_signed(rdb).map_err(|_| SHORT)?;
            sem.holder(holder.as_ref(), permits, deadline)?;
        }
        Ok(sem.finish())
    };
    match load() {
        Ok(sem) => into_raw(sem),
        Err(why) => refuse(rdb, "pdlk-sema", why),
    }
}

extern "C" fn sem_rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis hands back a pointer made by `into_raw::<Semaphore>`.
    let sem = unsafe { &*(value as *const Semaphore) };
    raw::save_unsigned(rdb, sem.limit());
    raw::save_unsigned(rdb, sem.len() as u64);
    for (holder, e) in sem.holders() {
        raw::save_slice(rdb, holder);
        raw::save_unsigned(rdb, e.permits);
        raw::save_signed(rdb, e.deadline_ms);
    }
}

extern "C" fn sem_aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: as above.
    let sem = unsafe { &*(value as *const Semaphore) };
    for (holder, e) in sem.holders() {
        emit(
            aof,
            super::replicate::SEMSET,
            key,
            holder,
            &[sem.limit() as i64, e.permits as i64, e.deadline_ms],
        );
    }
}

/// What one holder costs besides its name (held twice: in the map and in
/// the deadline index): two B-tree entries with their share of half-full
/// nodes. Measured against `used_memory` with 10,000 holders.
const SEM_HOLDER_OVERHEAD: usize = 124;

extern "C" fn sem_mem_usage(value: *const c_void) -> usize {
    // SAFETY: as above.
    let sem = unsafe { &*(value as *const Semaphore) };
    std::mem::size_of::<Semaphore>()
        + sem
            .holders()
            .map(|(h, _)| 2 * h.len().next_multiple_of(8) + SEM_HOLDER_OVERHEAD)
            .sum::<usize>()
}

/// Emits `CMD key holder n1 n2 n3` into a rewritten AOF.
fn emit(
    aof: *mut raw::RedisModuleIO,
    cmd: &str,
    key: *mut raw::RedisModuleString,
    holder: &[u8],
    nums: &[i64; 3],
) {
    let (Ok(cmd), Ok(fmt)) = (CString::new(cmd), CString::new("sblll")) else {
        return;
    };
    // SAFETY: the format names exactly the arguments passed.
    unsafe {
        rm!(RedisModule_EmitAOF)(
            aof,
            cmd.as_ptr(),
            fmt.as_ptr(),
            key,
            holder.as_ptr() as *const c_char,
            holder.len(),
            nums[0] as c_longlong,
            nums[1] as c_longlong,
            nums[2] as c_longlong,
        );
    }
}
