//! The read-write lock's state command, both halves: what a change here
//! replicates as, and what a replica or the AOF does with it.

use super::change;
use crate::core::error::Error;
use crate::core::rwlock::{Effect, Entry, RwLock};
use crate::core::since::Since;
use crate::glue::commit::Note;
use crate::glue::fences;
use crate::glue::kinds::state;
use crate::glue::replicate::{digits, fields, replicate_with_tail, Made};
use crate::glue::requests::piggy;
use crate::glue::types::Value;
use redis_module::{Context, RedisString};

/// `PADLOCK.RWSET key holder reads writes fence deadline-ms` (no holds:
/// the holder leaves). A state the rules could never reach (a writer
/// beside another holder) is refused.
impl state::SetState for RwLock {
    const WORDS: usize = 7;

    fn apply(ctx: &Context, args: &[RedisString]) -> Result<(), Error> {
        let [_, name, h, reads, writes, fence, deadline_ms] = args else {
            return Err(Error::Arity);
        };
        let e = Entry {
            reads: state::num(reads, "reads")?,
            writes: state::num(writes, "writes")?,
            fence: state::num(fence, "fence")?,
            deadline_ms: state::deadline(deadline_ms)?,
            since: Since::UNKNOWN,
        };
        crate::core::rwlock::stored::rw_entry(h, &e, true).map_err(state::invalid)?;
        fences::observe(e.fence);
        change(ctx, name, None, Note::default(), |rw| {
            crate::core::rwlock::stored::rw_fits(rw, h, &e).map_err(Error::Invalid)?;
            Ok(((), Some(Effect::set(h, e))))
        })
    }

    fn fields(args: &[RedisString]) -> Result<crate::glue::requests::piggy::Fields, Error> {
        let [_, _, _, reads, writes, fence, ..] = args else {
            return Err(Error::Arity);
        };
        Ok(crate::glue::requests::piggy::Fields {
            reads: state::num(reads, "reads")?,
            writes: state::num(writes, "writes")?,
            fence: state::num(fence, "fence")?,
            ..Default::default()
        })
    }
}

// ---- sent ---------------------------------------------------------------

/// One read-write lock holder's new state; no holds removes the holder
/// (and the key with its last holder).
pub fn rw_set(ctx: &Context, key: &RedisString, e: &Effect<'_>) {
    let mut tail = None;
    let ride = piggy::ride(
        ctx,
        key,
        &e.holder,
        fields(e.fence, 0, e.reads, e.writes),
        &mut tail,
    );
    if let piggy::Ride::Sent = ride {
        return;
    }
    let mut m = Made::new(ctx);
    let (h, r, w) = (m.holder(&e.holder), m.count(e.reads), m.count(e.writes));
    let (mut f, mut d) = (itoa::Buffer::new(), itoa::Buffer::new());
    let ((fp, fl), (dp, dl)) = (
        digits(&mut f, e.fence as i64),
        digits(&mut d, e.deadline_ms),
    );
    replicate_with_tail!(
        ctx,
        tail.as_ref(),
        RwLock::INFO.state_command.as_ptr(),
        c"ssssbb",
        c"ssssbbb",
        key.inner,
        h,
        r,
        w,
        fp,
        fl,
        dp,
        dl
    );
}
