//! Semaphores on their keys: per-holder leases inside one key. Holders
//! whose lease ran out are removed (and the removal replicated) by the
//! master before any change, so replicas never expire holders by their own
//! clock.

use std::rc::Rc;

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::semaphore::{Effect, Semaphore};
use crate::glue::blocking::Reply;
use crate::glue::commit::{commit, Note, Write};
use crate::glue::config::grace_running;
use crate::glue::info::{self, bump};
use crate::glue::key::Key;
use crate::glue::replicate;
use crate::glue::waiting::{Granted, TakeBack, Want};

/// The effects one command had on a semaphore key, and the key's state
/// after them.
struct Changed<'h> {
    /// A semaphore made by this command (the key was empty).
    fresh: Option<Semaphore>,
    /// Holders whose lease had ended, removed first.
    expired: Vec<Effect<'static>>,
    /// What the command itself decided.
    decided: Option<Effect<'h>>,
    empty: bool,
    latest: Option<i64>,
}

impl Write for Changed<'_> {
    fn write(self, ctx: &Context, name: &RedisString, key: &mut Key) {
        for e in self.expired.iter().chain(&self.decided) {
            replicate::sem_set(ctx, name, &e.holder, e.limit, e.permits, e.deadline_ms);
        }
        match (self.fresh, self.empty, self.latest) {
            (Some(s), false, Some(at)) => {
                key.put(s);
                key.set_expire_at(at);
            }
            (None, true, _) => key.delete(),
            (None, false, Some(at)) => key.set_expire_at(at),
            _ => {}
        }
    }
}

/// Decides on the semaphore at `name` (a new one with `new_limit` when the
/// key is empty) after removing holders whose lease ended by `now` (None:
/// a replicated effect, no clock read), and commits what changed. `note`
/// applies when `decide` returned an effect.
fn change<'h, R>(
    ctx: &Context,
    name: &RedisString,
    now: Option<i64>,
    new_limit: u64,
    note: Note,
    decide: impl FnOnce(&Semaphore) -> Result<(R, Option<Effect<'h>>), Error>,
) -> Result<R, Error> {
    let mut key = Key::write(ctx, name);
    let mut fresh = None;
    let (result, mut changed) = {
        let sem = match key.sem()? {
            Some(s) => s,
            None => fresh.insert(Semaphore::new(new_limit)),
        };
        let expired = now.map(|t| sem.expire(t)).unwrap_or_default();
        for e in &expired {
            sem.apply(e);
            bump(&info::SEM_EXPIRED_HOLDERS);
            bump(&info::EXPIRED);
        }
        let (result, decided) = match decide(sem) {
            Ok((r, e)) => (Ok(r), e),
            Err(e) => (Err(e), None),
        };
        if let Some(e) = &decided {
            sem.apply(e);
        }
        let changed = Changed {
            fresh: None,
            expired,
            decided,
            empty: sem.is_empty(),
            latest: sem.latest_deadline(),
        };
        (result, changed)
    };
    if changed.decided.is_some() {
        changed.fresh = fresh;
        commit(ctx, name, key, changed, note);
    } else if !changed.expired.is_empty() {
        commit(ctx, name, key, changed, Note::default());
    }
    result
}

/// Takes `permits` for `holder` now; None when not enough are free.
pub fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    ttl_ms: i64,
    now: i64,
) -> Result<Option<u64>, Error> {
    let note = Note::grant(&info::SEM_ACQUIRED, c"sem.acquire", holder);
    change(ctx, name, Some(now), limit, note, |s| {
        if s.fits(limit, permits) && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        Ok(match s.acquire(holder, limit, permits, ttl_ms, now) {
            Some((total, e)) => (Some(total), Some(e)),
            None => (None, None),
        })
    })
}

/// Gives back `permits` (None: all) of `holder`.
pub fn release(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    permits: Option<u64>,
    now: i64,
) -> Result<u64, Error> {
    let note = Note::new(&info::SEM_RELEASED, Some(c"sem.release"));
    change(ctx, name, Some(now), 0, note, |s| {
        let (left, e) = s.release(name.as_slice(), holder, permits)?;
        Ok((left, Some(e)))
    })
}

/// Resets the holder's lease; during the restart grace a holder that lost
/// its permits in a restart gets `permits` back.
pub fn extend(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    permits: Option<u64>,
    now: i64,
) -> Result<(), Error> {
    let note = Note::new(&info::SEM_EXTENDED, None);
    change(ctx, name, Some(now), 0, note, |s| {
        let e = match s.extend(name.as_slice(), holder, ttl_ms, now) {
            Err(Error::NotHeld { .. }) if grace_running(now, ttl_ms) => {
                s.recreate(holder, permits.unwrap_or(1), ttl_ms, now)
            }
            other => other?,
        };
        Ok(((), Some(e)))
    })
}

/// `PADLOCK.SEMSET`: one holder's state from the master or the AOF.
pub fn set(ctx: &Context, name: &RedisString, effect: Effect<'_>) -> Result<(), Error> {
    change(ctx, name, None, effect.limit, Note::default(), |_| {
        Ok(((), Some(effect)))
    })
}

/// `SEM.ACQUIRE ... BLOCK`.
pub struct Permits {
    pub limit: u64,
    pub permits: u64,
    pub ttl_ms: i64,
}

struct GivenPermits(u64);

impl TakeBack for GivenPermits {
    fn take_back(&self, ctx: &Context, names: &[RedisString], holder: &[u8]) {
        if let Some(name) = names.first() {
            let now = crate::glue::server::now_ms();
            let _ = release(ctx, name, holder, Some(self.0), now);
        }
    }
}

impl Want for Permits {
    fn try_grant(
        &self,
        ctx: &Context,
        names: &[RedisString],
        holder: &[u8],
        now: i64,
    ) -> Result<Option<Granted>, Error> {
        let Some(name) = names.first() else {
            return Ok(None);
        };
        let got = try_acquire(
            ctx,
            name,
            holder,
            self.limit,
            self.permits,
            self.ttl_ms,
            now,
        )?;
        Ok(got.map(|total| Granted {
            reply: Reply::Int(total as i64),
            take_back: Box::new(GivenPermits(self.permits)),
        }))
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }
}

pub fn want(limit: u64, permits: u64, ttl_ms: i64) -> Rc<dyn Want> {
    Rc::new(Permits {
        limit,
        permits,
        ttl_ms,
    })
}
