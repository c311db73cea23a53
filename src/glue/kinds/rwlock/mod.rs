//! Read-write locks on their keys: the rules of `core::rwlock` decided on
//! the stored value after expired holders left (`leased`), and the
//! requests that wait (`Hold`): readers share the key and are granted
//! together, an upgrading holder waits ahead of the queue.

pub mod commands;
mod data;
mod state;

use std::rc::Rc;

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::rwlock::{Effect, Grant, Mode, RwLock};
use crate::core::since::Since;
use crate::core::waitgraph::Need;
use crate::glue::blocking::Reply;
use crate::glue::commit::Note;
use crate::glue::config::grace_running;
use crate::glue::fences;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::types::Value;
use crate::glue::waiting::{Attempt, Granted, Seen, TakeBack, Try, Want};

use super::leased::{self, Leased};

impl Leased for RwLock {
    type Effect<'h> = Effect<'h>;

    fn expire(&self, now_ms: i64) -> Vec<Effect<'static>> {
        RwLock::expire(self, now_ms)
    }

    fn apply(&mut self, e: &Effect<'_>) -> Option<(Since, i64)> {
        RwLock::apply(self, e).map(|o| (o.since, o.deadline_ms))
    }

    fn is_empty(&self) -> bool {
        RwLock::is_empty(self)
    }

    fn latest_deadline(&self) -> Option<i64> {
        RwLock::latest_deadline(self)
    }

    fn replicate(ctx: &Context, name: &RedisString, e: &Effect<'_>) {
        state::rw_set(ctx, name, e);
    }

    fn lease<'e>(e: &'e mut Effect<'_>) -> Option<(&'e [u8], Option<u64>, &'e mut i64)> {
        let holds = e.reads > 0 || e.writes > 0;
        holds.then_some((&*e.holder, Some(e.fence), &mut e.deadline_ms))
    }
}

fn change<'h, R>(
    ctx: &Context,
    name: &RedisString,
    now: Option<i64>,
    note: Note,
    decide: impl FnOnce(&RwLock) -> Result<(R, Option<Effect<'h>>), Error>,
) -> Result<R, Error> {
    leased::change(ctx, name, now, RwLock::default, note, decide)
}

/// One hold of `mode` for `holder` now; None when refused. `queued`: other
/// requests wait for the key (newcomers go behind them).
pub fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    mode: Mode,
    queued: bool,
    ttl_ms: i64,
    at: Try,
) -> Result<Attempt<Grant>, Error> {
    let now = at.now;
    let note = Note::grant(
        &RwLock::INFO.counters.acquired,
        RwLock::INFO.acquire_event,
        holder,
    );
    change(ctx, name, Some(now), note, |rw| {
        let decided = fences::with(|f| rw.acquire(holder, mode, queued, ttl_ms, now, f))?;
        match decided {
            // A newcomer during the restart grace: an old holder may
            // still be working.
            Some((g, _)) if g.fresh && grace_running(now, ttl_ms) => Err(Error::TryAgain),
            Some((g, e)) => Ok((Attempt::Got(g), Some(e))),
            None => {
                let need = match mode {
                    Mode::Read => Need::Shared,
                    Mode::Write => Need::Exclusive,
                };
                let seen = at
                    .will_wait(ctx)
                    .then(|| Seen::of(rw, None, holder, need, now));
                Ok((Attempt::Refused(seen), None))
            }
        }
    })
}

/// True when `holder` asking for `mode` would upgrade its read holds.
pub fn is_upgrade(ctx: &Context, name: &RedisString, holder: &[u8], mode: Mode) -> bool {
    let mut key = Key::read(ctx, name);
    matches!(key.value::<RwLock>(), Ok(Some(rw)) if rw.is_upgrade(holder, mode))
}

/// One hold of `mode` fewer (only of the holder with `fence`, when given).
pub fn release(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    mode: Mode,
    fence: Option<u64>,
    now: Option<i64>,
) -> Result<(u64, u64), Error> {
    let note = Note::new(
        &RwLock::INFO.counters.released,
        Some(RwLock::INFO.release_event),
    );
    let left = change(ctx, name, now, note, |rw| {
        if fence.is_some_and(|f| rw.holder(holder).is_none_or(|e| e.fence != f)) {
            return Ok(((1, 1), None));
        }
        let (left, e) = rw.release(name.as_slice(), holder, mode)?;
        Ok((left, Some(e)))
    })?;
    if left == (0, 0) {
        keep::unbind(ctx, name, holder);
    }
    Ok(left)
}

/// `KEEP`: the holder's lease, reset while it still holds under `fence`.
pub fn renew(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    fence: Option<u64>,
    now: i64,
) -> Result<(), Error> {
    let note = Note::default();
    change(ctx, name, Some(now), note, |rw| {
        let held = rw
            .holder(holder)
            .filter(|e| fence.is_none_or(|f| e.fence == f));
        if held.is_none() {
            return Err(Error::NotHeld {
                key: name.as_slice().to_vec(),
                holder: holder.to_vec(),
            });
        }
        Ok(((), Some(rw.extend(name.as_slice(), holder, ttl_ms, now)?)))
    })
}

/// Binds the lease the holder has now to `client` (`KEEP`).
pub fn keep(ctx: &Context, name: &RedisString, holder: &[u8], client: Option<u64>, ttl_ms: i64) {
    keep::bind_held(ctx, name, holder, client, ttl_ms, renew, |key| {
        let rw = key.value::<RwLock>().ok().flatten()?;
        rw.holder(holder).map(|e| e.fence)
    });
}

/// Resets the holder's lease (all its holds).
pub fn extend(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    now: i64,
) -> Result<(), Error> {
    let note = Note::new(&RwLock::INFO.counters.extended, None);
    change(ctx, name, Some(now), note, |rw| {
        Ok(((), Some(rw.extend(name.as_slice(), holder, ttl_ms, now)?)))
    })
}

/// `PADLOCK.RWSET`: one holder's state from the master or the AOF.
/// `RWLOCK.ACQUIRE ... BLOCK`.
struct Hold {
    mode: Mode,
    ttl_ms: i64,
    upgrade: bool,
    /// `KEEP`: the waiting client, bound when granted.
    keep: Option<u64>,
}

/// What a waiter was granted: one hold of a mode, under its fence.
struct Given(Mode, u64);

impl TakeBack for Given {
    fn take_back(&self, ctx: &Context, names: &[RedisString], holder: &[u8]) {
        if let Some(name) = names.first() {
            let now = crate::glue::server::now_ms();
            let _ = release(ctx, name, holder, self.0, Some(self.1), Some(now));
        }
    }
}

impl Want for Hold {
    fn kind(&self) -> &'static crate::glue::types::KindInfo {
        RwLock::INFO
    }

    fn detail(&self) -> Option<redis_module::RedisValue> {
        Some(redis_module::RedisValue::BulkString(
            match self.mode {
                Mode::Read => "read",
                Mode::Write => "write",
            }
            .to_string(),
        ))
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
        // First in line: nobody is queued ahead.
        let client = self.keep.map(|_| client);
        let bound = (client, self.ttl_ms, renew as keep::Renew);
        let attempt = || {
            let a = try_acquire(
                ctx,
                name,
                holder,
                self.mode,
                false,
                self.ttl_ms,
                Try::serving(now),
            );
            Ok::<_, Error>(a?.got())
        };
        let bind = |_: &_| keep(ctx, name, holder, client, self.ttl_ms);
        let got = keep::grant_bound((name.as_slice(), holder), bound, attempt, bind)?;
        Ok(got.map(|g| Granted {
            reply: Reply::Int(g.fence as i64),
            take_back: Box::new(Given(self.mode, g.fence)),
            sole: self.mode == Mode::Write,
            frees_at: None,
        }))
    }

    fn rule(&self) -> Option<crate::glue::requests::piggy::Rule> {
        use crate::glue::requests::piggy::Rule;
        Some(Rule::Fence)
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }

    fn need(&self) -> Need {
        match self.mode {
            Mode::Read => Need::Shared,
            Mode::Write => Need::Exclusive,
        }
    }

    fn jumps_queue(&self) -> bool {
        self.upgrade
    }
}

pub fn want(mode: Mode, ttl_ms: i64, upgrade: bool, keep: Option<u64>) -> Rc<dyn Want> {
    Rc::new(Hold {
        mode,
        ttl_ms,
        upgrade,
        keep,
    })
}

impl super::Kind for RwLock {
    const RENEW: keep::Renew = renew;
    fn kept(&self, _key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        crate::core::keep::kept_of(self.holders().map(|(h, e)| (h, e.deadline_ms)))
    }

    fn lease_end(&self, holder: &[u8], _key_expire: Option<i64>) -> Option<i64> {
        self.holder(holder).map(|e| keep::end_of(e.deadline_ms))
    }
}
