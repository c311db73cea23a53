//! `PADLOCK.LOCKSET`: a lock's state from the master or the AOF, set
//! outright (count 0 with fence 0 and deadline 0: freed by its holder, the
//! form a request-id rides on).

use redis_module::{Context, RedisString};

use super::{commit, piggy, Effect, Key, Lock, Note};
use crate::core::error::Error;
use crate::core::since::Since;
use crate::core::stored;
use crate::glue::fences;
use crate::glue::kinds::effect;

/// `PADLOCK.LOCKSET key holder count fence deadline-ms`: state from the
/// master or the AOF, set outright.
impl effect::Effect for Lock {
    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error> {
        let [_, name, h, count, fence, deadline_ms] = args else {
            return Err(Error::Arity);
        };
        let (count, fence) = (effect::num(count, "count")?, effect::num(fence, "fence")?);
        let d = effect::deadline(deadline_ms)?;
        if (count, fence, d) == (0, 0, 0) {
            // Freed by the holder (the form a request-id rides on; `DEL`
            // otherwise).
            let mut key = Key::write(ctx, name);
            if key.lock()?.is_some() {
                commit(
                    ctx,
                    name,
                    key,
                    Effect::Free {
                        since: Since::UNKNOWN,
                    },
                    Note::default(),
                );
            }
            return Ok(());
        }
        let l = stored::lock(h, effect::max_holder(), count, fence).map_err(effect::invalid)?;
        stored::key_deadline(d).map_err(effect::invalid)?;
        set(ctx, name, l, d)
    }

    fn fields(args: &[RedisString]) -> Result<piggy::Fields, Error> {
        let [_, _, _, count, fence, ..] = args else {
            return Err(Error::Arity);
        };
        Ok(piggy::Fields {
            count: effect::num(count, "count")?,
            fence: effect::num(fence, "fence")?,
            ..Default::default()
        })
    }
}

fn set(ctx: &Context, name: &RedisString, lock: Lock, deadline_ms: i64) -> Result<(), Error> {
    let mut key = Key::write(ctx, name);
    key.lock()?;
    fences::observe(lock.fence);
    commit(
        ctx,
        name,
        key,
        Effect::Put { lock, deadline_ms },
        Note::default(),
    );
    Ok(())
}
