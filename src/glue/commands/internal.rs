//! The effect commands replicas and the AOF replay (see `replicate`). They
//! set state outright and read no clock, and pass the same effect on (to
//! the replica's own replicas). Arguments are checked like
//! any client input: they can be typed by hand too.

use redis_module::{Context, RedisString, RedisValue};

use crate::core::args::{parse_int, Arg, MAX_PERMITS};
use crate::core::error::Error;
use crate::core::lock::Lock;
use crate::core::rwlock::{self as rw, Entry};
use crate::core::semaphore::Effect;
use crate::core::stored::MAX_DEADLINE_MS;
use crate::glue::config::MAX_HOLDER_LEN_CEILING;
use crate::glue::kinds::{lock, rwlock, sem};

fn num(arg: &RedisString, name: &'static str, min: i64, max: i64) -> Result<i64, Error> {
    match parse_int(arg.bytes()) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Error::Range { name, min, max }),
    }
}

fn holder(arg: &RedisString) -> Result<&[u8], Error> {
    let h = arg.bytes();
    if h.is_empty() || h.len() > MAX_HOLDER_LEN_CEILING as usize {
        return Err(Error::HolderLength {
            max: MAX_HOLDER_LEN_CEILING as usize,
        });
    }
    Ok(h)
}

/// `PADLOCK.LOCKSET key holder count fence deadline-ms`
pub fn lockset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, h, count, fence, deadline] = args else {
        return Err(Error::Arity);
    };
    let lock = Lock {
        holder: holder(h)?.into(),
        count: num(count, "count", 1, i64::MAX)? as u64,
        fence: num(fence, "fence", 1, i64::MAX)? as u64,
    };
    let deadline = num(deadline, "deadline-ms", 0, i64::MAX)?;
    lock::set(ctx, name, lock, deadline)?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `PADLOCK.SEMSET key holder limit permits deadline-ms`
pub fn semset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, h, limit, permits, deadline] = args else {
        return Err(Error::Arity);
    };
    let holder = holder(h)?;
    let limit = num(limit, "limit", 1, MAX_PERMITS)? as u64;
    let permits = num(permits, "permits", 0, MAX_PERMITS)? as u64;
    let deadline = num(deadline, "deadline-ms", 0, i64::MAX)?;
    sem::set(ctx, name, Effect::set(holder, limit, permits, deadline))?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `PADLOCK.RWSET key holder reads writes fence deadline-ms` (no holds:
/// the holder leaves). A state the rules could never reach (a writer
/// beside another holder) is refused.
pub fn rwset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, h, reads, writes, fence, deadline] = args else {
        return Err(Error::Arity);
    };
    let holder = holder(h)?;
    let e = Entry {
        reads: num(reads, "reads", 0, i64::MAX)? as u64,
        writes: num(writes, "writes", 0, i64::MAX)? as u64,
        fence: num(fence, "fence", 0, i64::MAX)? as u64,
        deadline_ms: num(deadline, "deadline-ms", 0, MAX_DEADLINE_MS)?,
    };
    if e.reads + e.writes > 0 && (e.fence == 0 || e.deadline_ms == 0) {
        return Err(Error::Invalid("a holder needs a fence and a deadline-ms"));
    }
    rwlock::set(ctx, name, rw::Effect::set(holder, e))?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}
