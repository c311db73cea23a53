//! Command handlers, one file per family. Each is wrapped so that a bug can
//! only ever turn into an error reply, never a crashed server.

pub mod internal;
pub mod lock;
pub mod sem;

use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

use std::sync::atomic::AtomicU64;

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::info::bump;
use super::waiting::{self, Want};
use crate::core::error::Error;

type Body = fn(&Context, &[RedisString]) -> Result<RedisValue, Error>;

fn run(ctx: &Context, args: Vec<RedisString>, body: Body) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(|| body(ctx, &args))) {
        Ok(result) => super::reply(result),
        Err(_) => Err(RedisError::Str(
            "ERR padlock internal error, see the server log",
        )),
    }
}

macro_rules! handlers {
    ($($name:ident => $body:path),* $(,)?) => {
        $(
            pub fn $name(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
                run(ctx, args, $body)
            }
        )*
    };
}

handlers! {
    lock_acquire => lock::acquire,
    lock_reenter => lock::reenter,
    lock_release => lock::release,
    lock_extend => lock::extend,
    lock_info => lock::info,
    lock_macquire => lock::macquire,
    lock_mrelease => lock::mrelease,
    lock_waitfor => lock::waitfor,
    lock_graph => lock::graph,
    sem_acquire => sem::acquire,
    sem_release => sem::release,
    sem_extend => sem::extend,
    sem_info => sem::info,
    padlock_lockset => internal::lockset,
    padlock_semset => internal::semset,
}

/// What a refused acquire waits for with `BLOCK`.
struct Wait<'a> {
    holder: &'a [u8],
    keys: &'a [RedisString],
    want: Want,
    block_ms: Option<i64>,
}

/// The shape every acquire shares: what `attempt` got is the reply; when it
/// was refused, the reply is nil, or with `BLOCK` the client queues (the
/// restart grace refuses with `-TRYAGAIN`, and `BLOCK` waits that out too).
/// Inside MULTI, Lua or a module call `BLOCK` acts as absent.
fn grant_or_wait<T>(
    ctx: &Context,
    attempt: Result<Option<T>, Error>,
    reply: impl FnOnce(T) -> RedisValue,
    contended: &AtomicU64,
    wait: Wait<'_>,
) -> Result<RedisValue, Error> {
    let block = wait.block_ms.filter(|_| super::blocking::can_block(ctx));
    match attempt {
        Ok(Some(got)) => return Ok(reply(got)),
        Ok(None) => {}
        Err(Error::TryAgain) if block.is_some() => {}
        Err(e) => return Err(e),
    }
    bump(contended);
    match block {
        None => Ok(RedisValue::Null),
        Some(timeout) => waiting::wait(ctx, wait.holder, wait.keys, wait.want, timeout),
    }
}

/// Commands and the ACL categories they get where the server supports
/// them. `redis_module!` would refuse to load on Redis 7.0 if these were
/// mandatory, so they are set here, best effort.
const CATEGORIES: &[(&str, &str)] = &[
    ("lock.acquire", "write fast"),
    ("lock.reenter", "write fast"),
    ("lock.release", "write fast"),
    ("lock.extend", "write fast"),
    ("lock.info", "read fast"),
    ("lock.macquire", "write"),
    ("lock.mrelease", "write"),
    ("lock.waitfor", "write fast"),
    ("lock.graph", "read"),
    ("sem.acquire", "write fast"),
    ("sem.release", "write fast"),
    ("sem.extend", "write fast"),
    ("sem.info", "read"),
    ("padlock.lockset", "write admin dangerous"),
    ("padlock.semset", "write admin dangerous"),
];

pub fn set_acl_categories(ctx: &Context) {
    // SAFETY: reading the API table, written once at load.
    let (set, get, add) = unsafe {
        (
            redis_module::raw::RedisModule_SetCommandACLCategories,
            redis_module::raw::RedisModule_GetCommand,
            redis_module::raw::RedisModule_AddACLCategory,
        )
    };
    let (Some(set), Some(get)) = (set, get) else {
        return;
    };
    let own = match (add, CString::new("padlock")) {
        // SAFETY: called from OnLoad, as the API requires.
        (Some(add), Ok(name)) => unsafe { add(ctx.ctx, name.as_ptr()) == 0 },
        _ => false,
    };
    for (cmd, cats) in CATEGORIES {
        let own_cat = if cats.contains("admin") {
            ""
        } else {
            " padlock"
        };
        let (Ok(name), Ok(with_own), Ok(plain)) = (
            CString::new(*cmd),
            CString::new(format!("{cats}{own_cat}")),
            CString::new(*cats),
        ) else {
            continue;
        };
        // SAFETY: the command was registered by `redis_module!` before init.
        unsafe {
            let c = get(ctx.ctx, name.as_ptr());
            if c.is_null() {
                continue;
            }
            if !(own && set(c, with_own.as_ptr()) == 0) {
                set(c, plain.as_ptr());
            }
        }
    }
}
