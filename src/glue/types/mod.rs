//! padlock's data types and what they share: persistence with absolute
//! deadlines (RDB, and an AOF rewrite as the same state commands
//! replication uses), `COPY`, `MEMORY USAGE`, refusing damaged data, and the
//! unlink hook that tells padlock a key went away by some other hand than
//! its own. Each type's own callbacks live in its file.

mod engine;
mod unlinked;

pub use engine::Stored;
pub(crate) use unlinked::unlink2;
pub use unlinked::{deleting_on_purpose, take_unlinked};

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::{AtomicI64, AtomicU64};

use redis_module::native_types::RedisType;
use redis_module::raw;

use super::fences;
use super::guard;
use super::info::gauge;
use super::percentiles::Percentiles;
use super::requests::rdb as requests;
use crate::core::stored::{self, Invalid};

pub(crate) const ENCODING_VERSION: i32 = 1;
/// The type-methods layout of Redis 7.0 (copy, unlink, mem_usage2...): the
/// oldest server padlock supports reads exactly the fields set here.
pub(crate) const TYPE_METHOD_VERSION: u64 = 4;

/// One kind's counters for `INFO padlock`.
pub struct Counters {
    pub acquired: AtomicU64,
    pub reentered: AtomicU64,
    pub released: AtomicU64,
    pub extended: AtomicU64,
    pub contended: AtomicU64,
    /// Whole keys whose lease ran out.
    pub expired: AtomicU64,
    /// Holders whose own lease ran out inside a key that lives on.
    pub expired_holders: AtomicU64,
}

/// What a counter of `INFO padlock` is.
#[derive(Clone, Copy)]
pub enum Field {
    Acquired,
    Reentered,
    Released,
    Extended,
    Contended,
    Expired,
    ExpiredHolders,
}

impl Counters {
    pub const fn new() -> Counters {
        Counters {
            acquired: AtomicU64::new(0),
            reentered: AtomicU64::new(0),
            released: AtomicU64::new(0),
            extended: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            expired_holders: AtomicU64::new(0),
        }
    }

    pub fn get(&self, f: Field) -> &AtomicU64 {
        match f {
            Field::Acquired => &self.acquired,
            Field::Reentered => &self.reentered,
            Field::Released => &self.released,
            Field::Extended => &self.extended,
            Field::Contended => &self.contended,
            Field::Expired => &self.expired,
            Field::ExpiredHolders => &self.expired_holders,
        }
    }
}

/// Everything the module says of one kind outside its rules: names,
/// events, its state command and its `INFO` fields. Each kind's file has
/// one (`Value::INFO`); every registry (`stored`, the `INFO` report, the
/// state commands, eviction and expiry events) reads it, so a kind cannot
/// be registered with a part missing.
pub struct KindInfo {
    /// For log lines: "lock", "semaphore", "read-write lock".
    pub name: &'static str,
    /// As `LOCK.TOP` names it: "lock", "sem", "rwlock".
    pub short: &'static str,
    /// Whether every request on a key of this kind conflicts with every
    /// other one (a lock, a semaphore; not a read-write lock's readers):
    /// a request then waits for the same holders and for all requests
    /// ahead of it, so the waiting engine reads the holders once and the
    /// deadlock check summarises the queue (`waiting::deadlock`).
    pub all_conflict: bool,
    /// `INFO padlock` gauge of values in memory: `locks`, ...
    pub gauge: &'static str,
    pub values: AtomicI64,
    /// `INFO padlock` counter prefix (`""`, `sem_`, `rw_`) and fields, in
    /// order.
    pub prefix: &'static str,
    pub fields: &'static [(&'static str, Field)],
    pub counters: Counters,
    /// Keyspace events.
    pub acquire_event: &'static CStr,
    pub release_event: &'static CStr,
    pub expired_event: &'static CStr,
    pub evicted_event: &'static CStr,
    /// The state command replicas and the AOF apply (`padlock.lockset`),
    /// with its `COMMAND DOCS` text.
    pub state_command: &'static CStr,
    pub state_syntax: &'static str,
    pub state_summary: &'static str,
    pub state_complexity: &'static str,
    /// Wait and hold percentiles for `INFO padlock`.
    pub waits: Percentiles,
    pub holds: Percentiles,
}

pub(crate) use crate::glue::kinds::registry::with_kinds;

// ---- fence counter in the RDB ---------------------------------------------

// ---- and the remembered request-ids after the keys ------------------------

pub(crate) extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    guard::call((), || {
        if when == requests::AFTER {
            requests::aux_save(rdb);
        } else {
            raw::save_unsigned(rdb, fences::last());
        }
    })
}

pub(crate) extern "C" fn aux_load(
    rdb: *mut raw::RedisModuleIO,
    _encver: c_int,
    when: c_int,
) -> c_int {
    if when == requests::AFTER {
        let load = || match requests::aux_load(rdb) {
            Ok(()) => raw::Status::Ok as c_int,
            Err(why) => {
                refuse(rdb, "request-id", why);
                raw::Status::Err as c_int
            }
        };
        return guard::call(raw::Status::Err as c_int, load);
    }
    let load = || match raw::load_unsigned(rdb)
        .map_err(|_| SHORT)
        .and_then(stored::fence_counter)
    {
        Ok(v) => {
            fences::observe(v);
            raw::Status::Ok as c_int
        }
        Err(why) => {
            refuse(rdb, "fence counter", why);
            raw::Status::Err as c_int
        }
    };
    guard::call(raw::Status::Err as c_int, load)
}

// ---- refusing damaged data -------------------------------------------------

pub(crate) const SHORT: Invalid = "data ends early or cannot be read";

pub(crate) fn known_encoding(encver: c_int) -> Result<(), Invalid> {
    if encver == ENCODING_VERSION {
        Ok(())
    } else {
        Err("unknown encoding version (saved by a newer padlock?)")
    }
}

/// Logs why a stored value was refused and gives Redis nothing: `RESTORE`
/// then answers an error, an RDB load stops with Redis' own report, and no
/// part of the value is left behind.
pub(crate) fn refuse(rdb: *mut raw::RedisModuleIO, what: &str, why: Invalid) -> *mut c_void {
    if let Ok(msg) = CString::new(format!("padlock: refused a damaged {what} value: {why}")) {
        // SAFETY: live IO handle; the format takes exactly one string.
        unsafe {
            rm!(RedisModule_LogIOError)(rdb, c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
    std::ptr::null_mut()
}

/// One of padlock's value types: its Redis data type, what the module says
/// of it (`KindInfo`), and what the waiting engine reads of it (`Stored`).
/// Every value Redis holds is a `Box<T>` made by `into_raw`.
pub trait Value: Stored + Clone + 'static {
    const TYPE: &'static RedisType;
    const INFO: &'static KindInfo;
}

/// The value behind a module-type pointer, when it is one of padlock's
/// types: the one list of kinds the engine relies on.
///
/// # Safety
/// `value` must be the value of a key whose module type is `mt`.
pub unsafe fn stored<'a>(
    mt: *mut raw::RedisModuleType,
    value: *mut c_void,
) -> Option<&'a dyn Stored> {
    fn is<T: Value>(mt: *mut raw::RedisModuleType) -> bool {
        mt == *T::TYPE.raw_type.borrow()
    }
    macro_rules! lookup {
        ($($t:ty),*) => {
            $(
                if is::<$t>(mt) {
                    // SAFETY: a value of type `mt` is a `Box<T>` of the
                    // kind whose type `mt` is (see `into_raw`), alive
                    // while the key is open.
                    return unsafe { (value as *const $t).as_ref() }.map(|v| v as &dyn Stored);
                }
            )*
        };
    }
    with_kinds!(lookup);
    None
}

/// Creates every kind's data type (from OnLoad).
pub fn register(ctx: &redis_module::Context) -> redis_module::Status {
    let mut ok = true;
    macro_rules! create {
        ($($t:ty),*) => {
            $( ok = ok && <$t as Value>::TYPE.create_data_type(ctx.ctx).is_ok(); )*
        };
    }
    with_kinds!(create);
    if ok {
        redis_module::Status::Ok
    } else {
        redis_module::Status::Err
    }
}

/// Hands a value to Redis (counted in its gauge until `free_value`).
pub fn into_raw<T: Value>(value: T) -> *mut c_void {
    gauge(&T::INFO.values, 1);
    Box::into_raw(Box::new(value)).cast()
}

pub(crate) extern "C" fn free_value<T: Value>(value: *mut c_void) {
    guard::call((), || {
        // SAFETY: the pointer came from Box::into_raw of a T, and Redis
        // frees each value once.
        drop(unsafe { Box::from_raw(value as *mut T) });
        gauge(&T::INFO.values, -1);
    })
}

pub(crate) extern "C" fn copy_value<T: Value>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard::call(std::ptr::null_mut(), || {
        // SAFETY: Redis hands back a pointer it got from a Box<T>.
        let v = unsafe { &*(value as *const T) };
        into_raw(v.clone())
    })
}

/// Emits `padlock.fencefloor <last>` into a rewritten AOF, before each
/// value: an AOF without an RDB preamble then keeps the fence counter too,
/// and Valkey's atomic slot migration (whose snapshot is such an AOF)
/// carries the source's counter to the destination with the keys.
pub(crate) fn emit_floor(aof: *mut raw::RedisModuleIO) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(fences::last());
    // SAFETY: the format names one buffer argument that lives until the
    // call returns.
    unsafe {
        rm!(RedisModule_EmitAOF)(
            aof,
            c"padlock.fencefloor".as_ptr(),
            c"b".as_ptr(),
            digits.as_ptr() as *const c_char,
            digits.len(),
        );
    }
}

/// After a value in a rewritten AOF: the request-ids remembered for it.
pub(crate) fn emit_ids(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString) {
    requests::emit_for_key(aof, key);
}

/// Emits `CMD key holder n1 n2 n3 [n4]` into a rewritten AOF.
pub(crate) fn emit(
    aof: *mut raw::RedisModuleIO,
    cmd: &CStr,
    key: *mut raw::RedisModuleString,
    holder: &[u8],
    nums: &[i64],
) {
    let fmt = if nums.len() == 4 { c"sbllll" } else { c"sblll" };
    let n = |i: usize| nums.get(i).copied().unwrap_or(0) as c_longlong;
    // SAFETY: the format names exactly the arguments it reads (a trailing
    // one it does not name is ignored).
    unsafe {
        rm!(RedisModule_EmitAOF)(
            aof,
            cmd.as_ptr(),
            fmt.as_ptr(),
            key,
            holder.as_ptr() as *const c_char,
            holder.len(),
            n(0),
            n(1),
            n(2),
            n(3),
        );
    }
}
