//! The semaphore's state command, both halves: what a change here
//! replicates as, and what a replica or the AOF does with it.

use super::change;
use crate::core::error::Error;
use crate::core::semaphore::{Effect, Semaphore};
use crate::glue::commit::Note;
use crate::glue::kinds::state;
use crate::glue::replicate::{digits, fields, replicate_with_tail, Made};
use crate::glue::requests::piggy;
use crate::glue::types::Value;
use redis_module::{Context, RedisString};

/// `PADLOCK.SEMSET`: one holder's state from the master or the AOF.
/// `PADLOCK.SEMSET key holder limit permits deadline-ms` (permits 0: the
/// holder leaves).
impl state::SetState for Semaphore {
    const WORDS: usize = 6;

    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error> {
        let [_, name, h, limit, permits, deadline_ms] = args else {
            return Err(Error::Arity);
        };
        let (limit, permits) = (state::num(limit, "limit")?, state::num(permits, "permits")?);
        let d = state::deadline(deadline_ms)?;
        crate::core::semaphore::stored::limit(limit).map_err(state::invalid)?;
        crate::core::semaphore::stored::sem_holder(h, permits, d, true).map_err(state::invalid)?;
        let e = Effect::set(h, limit, permits, d);
        change(ctx, name, None, limit, Note::default(), |_| {
            Ok(((), Some(e)))
        })
    }

    fn fields(args: &[RedisString]) -> Result<crate::glue::requests::piggy::Fields, Error> {
        let [_, _, _, _, permits, ..] = args else {
            return Err(Error::Arity);
        };
        Ok(crate::glue::requests::piggy::Fields {
            count: state::num(permits, "permits")?,
            ..Default::default()
        })
    }
}

// ---- sent ---------------------------------------------------------------

/// One semaphore holder's new state; permits 0 removes the holder (and the
/// key with its last holder).
pub fn sem_set(
    ctx: &Context,
    key: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    deadline_ms: i64,
) {
    let mut tail = None;
    let ride = piggy::ride(ctx, key, holder, fields(0, permits, 0, 0), &mut tail);
    if let piggy::Ride::Sent = ride {
        return;
    }
    let mut m = Made::new(ctx);
    let (h, l, p) = (m.holder(holder), m.count(limit), m.count(permits));
    let mut d = itoa::Buffer::new();
    let (dp, dl) = digits(&mut d, deadline_ms);
    replicate_with_tail!(
        ctx,
        tail.as_ref(),
        Semaphore::INFO.state_command.as_ptr(),
        c"ssssb",
        c"ssssbb",
        key.inner,
        h,
        l,
        p,
        dp,
        dl
    );
}
