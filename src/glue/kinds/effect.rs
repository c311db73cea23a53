//! The effect commands replicas and the AOF replay (see `replicate`): each
//! kind decodes its own (`Effect::apply`) and sets the state outright,
//! reading no clock, passing the same effect on to its own replicas. They
//! are for the replication stream and the AOF only: on Redis 8 they are
//! registered `internal` (unknown to clients), and everywhere they refuse
//! a call that came from anywhere else, since with them a client could
//! steal a lock or hand out fences that go backwards. What they accept is
//! checked by the same rules as an RDB load (`core::stored`), so an
//! accepted effect is always a state the server can save and load again.

use redis_module::{Context, ContextFlags, RedisString, RedisValue};

use crate::core::args::{parse_int, Arg};
use crate::core::error::Error;
use crate::core::stored::Invalid;
use crate::glue::config::limits;
use crate::glue::types::Value;

/// A kind's effect command.
pub trait Effect: Value {
    /// Decodes `PADLOCK.*SET key holder ...` (arguments with the name) and
    /// applies it.
    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error>;
}

/// The body of every kind's effect command.
pub fn command<K: Effect>(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    from_replication(ctx, args)?;
    K::apply(ctx, args)?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Refuses an effect that came from neither the master link, the AOF
/// loader nor a slot migration's stream.
pub fn from_replication(ctx: &Context, args: &[RedisString]) -> Result<(), Error> {
    let name = args.first().ok_or(Error::Arity)?;
    let flags = ctx.get_flags();
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        return Err(Error::EffectOnly(name.as_slice().to_vec()));
    }
    Ok(())
}

/// `padlock.fencefloor fence`: the fence counter is raised to at least
/// `fence` (sent by an atomic slot migration's source with the slots).
pub fn fence_floor(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    from_replication(ctx, args)?;
    let [_, fence] = args else {
        return Err(Error::Arity);
    };
    let f = crate::core::stored::fence_counter(num(fence, "fence")?).map_err(invalid)?;
    crate::glue::fences::observe(f);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// A number of an effect: unsigned, as Redis parses integers.
pub fn num(arg: &RedisString, name: &'static str) -> Result<u64, Error> {
    match parse_int(arg.bytes()) {
        Some(v) if v >= 0 => Ok(v as u64),
        _ => Err(Error::Range {
            name,
            min: 0,
            max: i64::MAX,
        }),
    }
}

pub fn deadline(arg: &RedisString) -> Result<i64, Error> {
    num(arg, "deadline-ms").map(|d| d as i64)
}

pub fn invalid(why: Invalid) -> Error {
    Error::Invalid(why)
}

/// Effects obey `max-holder-len` like commands do.
pub fn max_holder() -> usize {
    limits().max_holder_len
}
