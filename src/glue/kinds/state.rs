//! The state commands replicas and the AOF replay (see `replicate`): each
//! kind decodes its own (`SetState::apply`) and sets the state outright,
//! reading no clock, passing the same effect on to its own replicas. They
//! are for the replication stream and the AOF only: on Redis 8 they are
//! registered `internal` (unknown to clients), and everywhere they refuse
//! a call that came from anywhere else, since with them a client could
//! steal a lock or hand out fences that go backwards. What they accept is
//! checked by the same rules as an RDB load (`core::stored`), so an
//! accepted effect is always a state the server can save and load again.

use redis_module::{Context, RedisString, RedisValue};

use crate::core::args::{parse_int, Arg};
use crate::core::error::Error;
use crate::core::ids::Address;
use crate::core::stored::Invalid;
use crate::glue::requests::piggy::{self, Fields};
use crate::glue::requests::{self, rider, Tag};
use crate::glue::types::Value;

/// A kind's state command.
pub trait SetState: Value {
    /// Its own words, the name included: a request-id's tail follows.
    const WORDS: usize;

    /// Decodes `PADLOCK.*SET key holder ...` (arguments with the name) and
    /// applies it.
    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error>;

    /// The fields a request-id's reply rule reads (`requests::piggy`).
    fn fields(args: &[RedisString]) -> Result<Fields, Error>;
}

/// The body of every kind's state command: its own arguments, and the
/// request-id riding on them, if any (remembered as the master did, and
/// passed on with the effect to this server's own AOF and replicas).
pub fn command<K: SetState>(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let flags = from_replication(ctx, args)?;
    let own = match piggy::tail_start(args, K::WORDS) {
        Some(at) => with_id::<K>(ctx, args, at)?,
        None => {
            K::apply(ctx, args)?;
            args
        }
    };
    // Every kind's own words end in its deadline (see `replicate`).
    if let ([_, name, ..], Some(d)) = (own, own.last().and_then(|d| parse_int(d.bytes()))) {
        crate::glue::keep::arrived(ctx, flags, name.as_slice(), d);
    }
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Applies an effect with the request-id riding on it from word `at` on;
/// returns the kind's own words.
fn with_id<'a, K: SetState>(
    ctx: &Context,
    args: &'a [RedisString],
    at: usize,
) -> Result<&'a [RedisString], Error> {
    let (own, tail) = args.split_at(at);
    let piggy::Tail {
        id,
        at_ms,
        print,
        rule,
    } = piggy::parse(tail)?;
    // The id is remembered under this holder, which must be one a state
    // may name (an RDB's ids do not load otherwise): checked here, since a
    // state that frees the key (a count of 0) reads no holder of its own.
    let holder = own.get(2).map_or(&[][..], |h| h.bytes());
    crate::core::stored::holder(holder).map_err(invalid)?;
    let answer = K::fields(own)?.answer(rule);
    let tag = Tag {
        at: Address::new(
            crate::glue::blocking::selected_db(ctx),
            own[1].bytes(),
            own[2].bytes(),
        ),
        id,
        print,
    };
    {
        let _boarded = rider::board(&tag, Some(rule), at_ms);
        K::apply(ctx, own)?;
        rider::alight();
    }
    requests::rode_in(ctx, tag, answer, at_ms);
    Ok(own)
}

pub use crate::glue::server::from_replication;

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
