//! Semaphores on their keys: per-holder leases inside one key (see
//! `leased` for what they share with read-write locks).

pub mod commands;
mod data;
mod state;

use std::rc::Rc;

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::semaphore::{Effect, Semaphore};
use crate::core::since::Since;
use crate::core::waitgraph::Need;
use crate::glue::blocking::Reply;
use crate::glue::commit::Note;
use crate::glue::config::grace_running;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::types::Value;
use crate::glue::waiting::{Attempt, Granted, Seen, TakeBack, Try, Want};

use super::leased::{self, Leased};

impl Leased for Semaphore {
    type Effect<'h> = Effect<'h>;

    fn expire(&self, now_ms: i64) -> Vec<Effect<'static>> {
        Semaphore::expire(self, now_ms)
    }

    fn apply(&mut self, e: &Effect<'_>) -> Option<(Since, i64)> {
        Semaphore::apply(self, e).map(|o| (o.since, o.deadline_ms))
    }

    fn is_empty(&self) -> bool {
        Semaphore::is_empty(self)
    }

    fn latest_deadline(&self) -> Option<i64> {
        Semaphore::latest_deadline(self)
    }

    fn replicate(ctx: &Context, name: &RedisString, e: &Effect<'_>) {
        state::sem_set(ctx, name, &e.holder, e.limit, e.permits, e.deadline_ms);
    }

    fn lease<'e>(e: &'e mut Effect<'_>) -> Option<(&'e [u8], Option<u64>, &'e mut i64)> {
        (e.permits > 0).then_some((&*e.holder, None, &mut e.deadline_ms))
    }
}

/// `leased::change` on a semaphore; an empty key becomes one with `limit`.
fn change<'h, R>(
    ctx: &Context,
    name: &RedisString,
    now: Option<i64>,
    limit: u64,
    note: Note,
    decide: impl FnOnce(&Semaphore) -> Result<(R, Option<Effect<'h>>), Error>,
) -> Result<R, Error> {
    leased::change(ctx, name, now, || Semaphore::new(limit), note, decide)
}

/// Takes `permits` for `holder` now; refused when not enough are free,
/// with what was seen of the key when the request is about to wait.
pub fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    ttl_ms: i64,
    at: Try,
) -> Result<Attempt<u64>, Error> {
    let now = at.now;
    let note = Note::grant(
        &Semaphore::INFO.counters.acquired,
        Semaphore::INFO.acquire_event,
        holder,
    );
    change(ctx, name, Some(now), limit, note, |s| {
        if s.fits(limit, permits) && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        Ok(match s.acquire(holder, limit, permits, ttl_ms, now) {
            Some((total, e)) => (Attempt::Got(total), Some(e)),
            None => {
                let seen = at
                    .will_wait(ctx)
                    .then(|| Seen::of(s, None, holder, Need::Exclusive, now));
                (Attempt::Refused(seen), None)
            }
        })
    })
}

/// A request refused because others queue ahead of it, with what its wait
/// needs of the key when it will wait (read now, so the wait reads the key
/// no more).
pub fn refused_behind_queue(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    at: Try,
) -> Result<Attempt<u64>, Error> {
    if !at.will_wait(ctx) {
        return Ok(Attempt::Refused(None));
    }
    let mut key = Key::read(ctx, name);
    let seen = key
        .value::<Semaphore>()?
        .map(|s| Seen::of(&*s, None, holder, Need::Exclusive, at.now));
    Ok(Attempt::Refused(seen))
}

/// Gives back `permits` (None: all) of `holder`.
pub fn release(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    permits: Option<u64>,
    now: Option<i64>,
) -> Result<u64, Error> {
    let note = Note::new(
        &Semaphore::INFO.counters.released,
        Some(Semaphore::INFO.release_event),
    );
    let left = change(ctx, name, now, 0, note, |s| {
        let (left, e) = s.release(name.as_slice(), holder, permits)?;
        Ok((left, Some(e)))
    })?;
    if left == 0 {
        keep::unbind(ctx, name, holder);
    }
    Ok(left)
}

/// `KEEP`: the holder's lease, reset while it holds permits.
pub fn renew(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    _fence: Option<u64>,
    now: i64,
) -> Result<(), Error> {
    let note = Note::default();
    change(ctx, name, Some(now), 0, note, |s| {
        Ok(((), Some(s.extend(name.as_slice(), holder, ttl_ms, now)?)))
    })
}

/// Binds the holder's lease to `client` (`KEEP`).
pub fn keep(ctx: &Context, name: &RedisString, holder: &[u8], client: Option<u64>, ttl_ms: i64) {
    if let Some(c) = client {
        keep::bind(ctx, name, holder, c, ttl_ms, renew, None);
    }
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
    let note = Note::new(&Semaphore::INFO.counters.extended, None);
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

/// `SEM.ACQUIRE ... BLOCK`.
pub struct Permits {
    pub limit: u64,
    pub permits: u64,
    pub ttl_ms: i64,
    /// `KEEP`: the waiting client, bound when granted.
    pub keep: Option<u64>,
}

struct GivenPermits(u64);

impl TakeBack for GivenPermits {
    fn take_back(&self, ctx: &Context, names: &[RedisString], holder: &[u8]) {
        if let Some(name) = names.first() {
            let now = crate::glue::server::now_ms();
            let _ = release(ctx, name, holder, Some(self.0), Some(now));
        }
    }
}

impl Want for Permits {
    fn kind(&self) -> &'static crate::glue::types::KindInfo {
        Semaphore::INFO
    }

    fn detail(&self) -> Option<redis_module::RedisValue> {
        Some(redis_module::RedisValue::Integer(self.permits as i64))
    }

    fn try_grant(
        &self,
        ctx: &Context,
        names: &[RedisString],
        holder: &[u8],
        client: u64,
        now: i64,
    ) -> Result<Option<Granted>, Error> {
        let Some(name) = names.first() else {
            return Ok(None);
        };
        let client = self.keep.map(|_| client);
        let bound = (client, self.ttl_ms, renew as keep::Renew);
        let attempt = || {
            let a = try_acquire(
                ctx,
                name,
                holder,
                self.limit,
                self.permits,
                self.ttl_ms,
                Try::serving(now),
            );
            Ok::<_, Error>(a?.got())
        };
        let bind = |_: &_| keep(ctx, name, holder, client, self.ttl_ms);
        let got = keep::grant_bound((name.as_slice(), holder), bound, attempt, bind)?;
        Ok(got.map(|total| Granted {
            reply: Reply::Int(total as i64),
            take_back: Box::new(GivenPermits(self.permits)),
            sole: false,
            frees_at: None,
        }))
    }

    fn rule(&self) -> Option<crate::glue::requests::piggy::Rule> {
        use crate::glue::requests::piggy::Rule;
        Some(Rule::Permits)
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }
}

pub fn want(limit: u64, permits: u64, ttl_ms: i64, keep: Option<u64>) -> Rc<dyn Want> {
    Rc::new(Permits {
        limit,
        permits,
        ttl_ms,
        keep,
    })
}

impl super::Kind for Semaphore {
    const RENEW: keep::Renew = renew;
    fn kept(&self, _key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        crate::core::keep::kept_of(self.holders().map(|(h, e)| (h, e.deadline_ms)))
    }

    fn lease_end(&self, holder: &[u8], _key_expire: Option<i64>) -> Option<i64> {
        self.holder(holder).map(|e| keep::end_of(e.deadline_ms))
    }
}
