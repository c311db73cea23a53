//! The effect commands replicas and the AOF replay (see `replicate`). They
//! set state outright and read no clock, and pass the same effect on (to
//! the replica's own replicas). They are for the replication stream and the
//! AOF only: on Redis 8 they are registered `internal` (unknown to
//! clients), and everywhere they refuse a call that came from anywhere
//! else, since with them a client could steal a lock or hand out fences
//! that go backwards. What they accept is checked by the same rules as an
//! RDB load (`core::stored`), so an accepted effect is always a state the
//! server can save and load again.

use redis_module::{Context, ContextFlags, RedisString, RedisValue};

use crate::core::args::{parse_int, Arg};
use crate::core::error::Error;
use crate::core::lock::Lock;
use crate::core::rwlock::{self as rw, Entry};
use crate::core::semaphore::Effect;
use crate::core::stored::{self, Invalid};
use crate::glue::config::limits;
use crate::glue::kinds::{lock, rwlock, sem};

/// Refuses an effect command that did not come from the master link or the
/// AOF loader.
fn from_replication(ctx: &Context, name: &RedisString) -> Result<(), Error> {
    let flags = ctx.get_flags();
    if flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        return Ok(());
    }
    Err(Error::EffectOnly(name.as_slice().to_vec()))
}

/// A number of an effect: unsigned, as Redis parses integers.
fn num(arg: &RedisString, name: &'static str) -> Result<u64, Error> {
    match parse_int(arg.bytes()) {
        Some(v) if v >= 0 => Ok(v as u64),
        _ => Err(Error::Range {
            name,
            min: 0,
            max: i64::MAX,
        }),
    }
}

fn deadline(arg: &RedisString) -> Result<i64, Error> {
    num(arg, "deadline-ms").map(|d| d as i64)
}

fn invalid(why: Invalid) -> Error {
    Error::Invalid(why)
}

fn max_holder() -> usize {
    limits().max_holder_len
}

/// `PADLOCK.LOCKSET key holder count fence deadline-ms`
pub fn lockset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [cmd, name, h, count, fence, deadline_ms] = args else {
        return Err(Error::Arity);
    };
    from_replication(ctx, cmd)?;
    let (count, fence, d) = (
        num(count, "count")?,
        num(fence, "fence")?,
        deadline(deadline_ms)?,
    );
    let l: Lock = stored::lock(h.bytes(), max_holder(), count, fence).map_err(invalid)?;
    stored::key_deadline(d).map_err(invalid)?;
    lock::set(ctx, name, l, d)?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `PADLOCK.SEMSET key holder limit permits deadline-ms` (permits 0: the
/// holder leaves).
pub fn semset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [cmd, name, h, limit, permits, deadline_ms] = args else {
        return Err(Error::Arity);
    };
    from_replication(ctx, cmd)?;
    let holder = h.bytes();
    let (limit, permits, d) = (
        num(limit, "limit")?,
        num(permits, "permits")?,
        deadline(deadline_ms)?,
    );
    stored::limit(limit).map_err(invalid)?;
    stored::sem_holder(holder, max_holder(), permits, d, true).map_err(invalid)?;
    sem::set(ctx, name, Effect::set(holder, limit, permits, d))?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `PADLOCK.RWSET key holder reads writes fence deadline-ms` (no holds:
/// the holder leaves). A state the rules could never reach (a writer
/// beside another holder) is refused.
pub fn rwset(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let [cmd, name, h, reads, writes, fence, deadline_ms] = args else {
        return Err(Error::Arity);
    };
    from_replication(ctx, cmd)?;
    let holder = h.bytes();
    let e = Entry {
        reads: num(reads, "reads")?,
        writes: num(writes, "writes")?,
        fence: num(fence, "fence")?,
        deadline_ms: deadline(deadline_ms)?,
    };
    stored::rw_entry(holder, max_holder(), &e, true).map_err(invalid)?;
    rwlock::set(ctx, name, rw::Effect::set(holder, e))?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}
