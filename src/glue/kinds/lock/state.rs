//! `PADLOCK.LOCKSET`: a lock's state from the master or the AOF, set
//! outright (count 0 with fence 0 and deadline 0: freed by its holder, the
//! form a request-id rides on).

use redis_module::{Context, RedisString};

use super::{commit, piggy, Effect, Key, Lock, Note};
use crate::core::error::Error;
use crate::core::since::Since;
use crate::core::stored;
use crate::glue::fences;
use crate::glue::kinds::state;
use crate::glue::replicate::{del, digits, fields, replicate_with_tail, Made};
use crate::glue::types::Value;

/// `PADLOCK.LOCKSET key holder count fence deadline-ms`: state from the
/// master or the AOF, set outright.
impl state::SetState for Lock {
    const WORDS: usize = 6;

    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error> {
        let [_, name, h, count, fence, deadline_ms] = args else {
            return Err(Error::Arity);
        };
        let (count, fence) = (state::num(count, "count")?, state::num(fence, "fence")?);
        let d = state::deadline(deadline_ms)?;
        if (count, fence, d) == (0, 0, 0) {
            // Freed by the holder (the form a request-id rides on; `DEL`
            // otherwise).
            let mut key = Key::write(ctx, name);
            if key.value::<Lock>()?.is_some() {
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
        let l = crate::core::lock::stored::lock(h, count, fence).map_err(state::invalid)?;
        stored::key_deadline(d).map_err(state::invalid)?;
        set(ctx, name, l, d)
    }

    fn fields(args: &[RedisString]) -> Result<piggy::Fields, Error> {
        let [_, _, _, count, fence, ..] = args else {
            return Err(Error::Arity);
        };
        Ok(piggy::Fields {
            count: state::num(count, "count")?,
            fence: state::num(fence, "fence")?,
            ..Default::default()
        })
    }
}

fn set(ctx: &Context, name: &RedisString, lock: Lock, deadline_ms: i64) -> Result<(), Error> {
    let mut key = Key::write(ctx, name);
    key.value::<Lock>()?;
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

// ---- sent: what this node's changes replicate as ----------------------

/// A lock's whole state: `PADLOCK.LOCKSET key holder count fence deadline-ms`.
pub fn lock_set(ctx: &Context, key: &RedisString, lock: &Lock, deadline_ms: i64) {
    let mut tail = None;
    let ride = piggy::ride(
        ctx,
        key,
        &lock.holder,
        fields(lock.fence, u64::from(lock.count), 0, 0),
        &mut tail,
    );
    if let piggy::Ride::Sent = ride {
        return;
    }
    let mut m = Made::new(ctx);
    let (h, c) = (m.holder(&lock.holder), m.count(u64::from(lock.count)));
    let (mut f, mut d) = (itoa::Buffer::new(), itoa::Buffer::new());
    let ((fp, fl), (dp, dl)) = (
        digits(&mut f, lock.fence as i64),
        digits(&mut d, deadline_ms),
    );
    // SAFETY: the format names exactly the arguments passed; the strings
    // and buffers live until the call returns.
    replicate_with_tail!(
        ctx,
        tail.as_ref(),
        Lock::INFO.state_command.as_ptr(),
        c"sssbb",
        c"sssbbb",
        key.inner,
        h,
        c,
        fp,
        fl,
        dp,
        dl
    );
}

/// A lock whose lease alone moved (a renewal: `KEEP`'s, or `LOCK.EXTEND`):
/// `PEXPIREAT key deadline`, which replicas and the AOF apply natively, in
/// about half the bytes of the whole value and without running a module
/// command there. The whole value when a request-id may ride on the effect.
pub fn lock_expire(ctx: &Context, key: &RedisString, lock: &Lock, deadline_ms: i64) {
    if crate::glue::requests::rider::aboard() {
        return lock_set(ctx, key, lock, deadline_ms);
    }
    let mut d = itoa::Buffer::new();
    let (dp, dl) = digits(&mut d, deadline_ms);
    // SAFETY: format "sb": one live string and a buffer that outlives the call.
    unsafe {
        rm!(RedisModule_Replicate)(
            ctx.ctx,
            c"PEXPIREAT".as_ptr(),
            c"sb".as_ptr(),
            key.inner,
            dp,
            dl,
        );
    }
}

/// A lock freed by `holder`: `DEL`, or, when the running request's id
/// rides on it, `PADLOCK.LOCKSET key holder 0 0 0 <tail>` (count 0 frees).
pub fn lock_free(ctx: &Context, key: &RedisString, holder: Option<&[u8]>) {
    let mut tail = None;
    let ride = holder.map(|h| piggy::ride(ctx, key, h, fields(0, 0, 0, 0), &mut tail));
    let t = match (ride, &tail) {
        (Some(piggy::Ride::Sent), _) => return,
        (_, Some(t)) => t,
        _ => return del(ctx, key),
    };
    let mut m = Made::new(ctx);
    let h = m.holder(holder.unwrap_or_default());
    let zero = m.count(0);
    replicate_with_tail!(
        ctx,
        Some(t),
        Lock::INFO.state_command.as_ptr(),
        c"sssss",
        c"sssssb",
        key.inner,
        h,
        zero,
        zero,
        zero
    );
}
