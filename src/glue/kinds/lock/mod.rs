//! Locks on their keys: the rules of `core::lock` decided on the stored
//! lock, written as effects, and the lock requests that wait (`One`,
//! `Multi`).

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::lock::{self, Effect, Grant, Lock};
use crate::core::since::Since;
use crate::core::waitgraph::Need;
use crate::glue::commit::{commit, Note, Write};
use crate::glue::config::grace_running;
use crate::glue::fences;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::percentiles;
use crate::glue::requests::piggy;
use crate::glue::waiting::{self, Attempt, Seen, Try};

pub mod commands;
mod data;
mod kept;
mod state;
mod waits;

use crate::glue::types::Value;
pub use kept::{keep, keep_held, renew};
pub use waits::{want_multi, want_one};

impl Write for Effect {
    fn write(self, ctx: &Context, name: &RedisString, key: &mut Key) {
        match self {
            Effect::Put { lock, deadline_ms } => {
                let deadline_ms =
                    keep::write_at(ctx, name, &lock.holder, Some(lock.fence), deadline_ms);
                state::lock_set(ctx, name, &lock, deadline_ms);
                key.put(lock);
                // 0: no expiry (an AOF rewrite sends the expiry apart).
                if deadline_ms > 0 {
                    key.set_expire_at(deadline_ms);
                }
            }
            Effect::Touch { count, deadline_ms } => {
                // A bound lease stays far away.
                let deadline_ms = match deadline_ms {
                    Some(d) if keep::any_bound() => match key.value::<Lock>() {
                        Ok(Some(l)) => Some(keep::held_at(ctx, name, &l.holder, Some(l.fence), d)),
                        _ => Some(d),
                    },
                    d => d,
                };
                let deadline = match deadline_ms {
                    Some(d) => {
                        key.set_expire_at(d);
                        d
                    }
                    None => key.expire_at().unwrap_or(0),
                };
                if let Ok(Some(l)) = key.value::<Lock>() {
                    let same = u64::from(l.count) == count;
                    l.count = count as u32;
                    if same && deadline_ms.is_some() {
                        state::lock_expire(ctx, name, l, deadline);
                    } else {
                        state::lock_set(ctx, name, l, deadline);
                    }
                }
                key.modified();
            }
            Effect::Free { since } => {
                if since != Since::UNKNOWN {
                    Lock::INFO.holds.held(since, percentiles::now_ms());
                }
                // The holder only when a request-id may ride on the effect.
                let holder = crate::glue::requests::rider::aboard()
                    .then(|| key.value::<Lock>().ok().flatten().map(|l| l.holder.clone()))
                    .flatten();
                key.delete();
                state::lock_free(ctx, name, holder.as_deref());
            }
        }
    }
}

fn grant_note<'h>(g: &Grant, holder: &'h [u8]) -> Note<'h> {
    let counter = if g.fresh {
        &Lock::INFO.counters.acquired
    } else {
        &Lock::INFO.counters.reentered
    };
    Note::grant(counter, Lock::INFO.acquire_event, holder)
}

/// With waiters queued, a key belongs to the head of its queue: only the
/// current holder may still reenter it. `Some(refusal)` when the key is
/// closed to `holder`, with what a wait needs of the key when the request
/// will wait (the key is open now: the wait then reads it no more).
pub fn closed_to(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    at: Try,
) -> Result<Option<Attempt<Grant>>, Error> {
    if !waiting::has_waiters(ctx, name) {
        return Ok(None);
    }
    let mut key = Key::read(ctx, name);
    match key.value::<Lock>()? {
        Some(l) if *l.holder == *holder => Ok(None),
        // Read only for a refusal that waits (a reentry or a nil pays nothing).
        Some(_) if at.will_wait(ctx) => refused_seen(&mut key, holder, at.now).map(Some),
        _ => Ok(Some(Attempt::Refused(None))),
    }
}

/// A refusal that will wait, with what the wait needs of the key, read
/// while it is open (the wait then reads it no more).
fn refused_seen(key: &mut Key, holder: &[u8], now: i64) -> Result<Attempt<Grant>, Error> {
    let expire = key.expire_at();
    let seen = key
        .value::<Lock>()?
        .map(|l| Seen::of(&*l, expire, holder, Need::Exclusive, now));
    Ok(Attempt::Refused(seen))
}

/// Takes one lock for `holder` now; refused when someone else has it,
/// with what was seen of the key when the request is about to wait (so
/// that the wait need not read it again; a refusal that only answers nil
/// pays nothing for it).
pub fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    at: Try,
) -> Result<Attempt<Grant>, Error> {
    let now = at.now;
    let mut key = Key::write(ctx, name);
    let decided = {
        let cur = key.value::<Lock>()?;
        if cur.is_none() && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        fences::with(|f| lock::acquire(cur.as_deref(), holder, ttl_ms, now, f))?
    };
    let Some((grant, effect)) = decided else {
        if !at.will_wait(ctx) {
            return Ok(Attempt::Refused(None));
        }
        return refused_seen(&mut key, holder, now);
    };
    commit(ctx, name, key, effect, grant_note(&grant, holder));
    Ok(Attempt::Got(grant))
}

/// All of `names` for `holder` now, or nothing.
pub fn try_macquire(
    ctx: &Context,
    names: &[RedisString],
    holder: &[u8],
    ttl_ms: i64,
    now: i64,
) -> Result<Option<Vec<u64>>, Error> {
    let mut keys: Vec<Key> = names.iter().map(|n| Key::write(ctx, n)).collect();
    let decided = {
        let cur = keys
            .iter_mut()
            .map(|k| k.value::<Lock>().map(|l| l.map(|l| &*l)))
            .collect::<Result<Vec<_>, _>>()?;
        if cur.iter().any(Option::is_none) && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        fences::with(|f| lock::macquire(&cur, holder, ttl_ms, now, f))?
    };
    let Some(steps) = decided else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(steps.len());
    for ((grant, effect), (key, name)) in steps.into_iter().zip(keys.into_iter().zip(names)) {
        commit(ctx, name, key, effect, grant_note(&grant, holder));
        out.push(grant.fence);
    }
    Ok(Some(out))
}

pub fn reenter(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    now: i64,
) -> Result<u64, Error> {
    let mut key = Key::write(ctx, name);
    let (count, effect) = lock::reenter(
        name.as_slice(),
        key.value::<Lock>()?.as_deref(),
        holder,
        ttl_ms,
        now,
    )?;
    commit(
        ctx,
        name,
        key,
        effect,
        Note::new(&Lock::INFO.counters.reentered, None),
    );
    Ok(count)
}

/// One release by `holder` (only of the grant with `fence`, when given).
pub fn release(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    fence: Option<u64>,
) -> Result<u64, Error> {
    let mut key = Key::write(ctx, name);
    let (count, effect) = {
        let cur = key
            .value::<Lock>()?
            .filter(|l| fence.is_none_or(|f| l.fence == f));
        lock::release(name.as_slice(), cur.as_deref(), holder)?
    };
    commit_release(ctx, name, key, effect, count, holder);
    Ok(count)
}

/// Commits one release; a lock let go entirely is no longer kept alive.
fn commit_release(
    ctx: &Context,
    name: &RedisString,
    key: Key,
    effect: Effect,
    count: u64,
    holder: &[u8],
) {
    let note = Note::new(
        &Lock::INFO.counters.released,
        Some(Lock::INFO.release_event),
    );
    commit(ctx, name, key, effect, note);
    if count == 0 {
        keep::unbind(ctx, name, holder);
    }
}

/// All or nothing: one release of each key.
pub fn mrelease(ctx: &Context, names: &[RedisString], holder: &[u8]) -> Result<Vec<u64>, Error> {
    let mut keys: Vec<Key> = names.iter().map(|n| Key::write(ctx, n)).collect();
    let steps = {
        let cur = keys
            .iter_mut()
            .map(|k| k.value::<Lock>().map(|l| l.map(|l| &*l)))
            .collect::<Result<Vec<_>, _>>()?;
        let ns: Vec<&[u8]> = names.iter().map(|k| k.as_slice()).collect();
        lock::mrelease(&ns, &cur, holder)?
    };
    let mut out = Vec::with_capacity(steps.len());
    for ((count, effect), (key, name)) in steps.into_iter().zip(keys.into_iter().zip(names)) {
        commit_release(ctx, name, key, effect, count, holder);
        out.push(count);
    }
    Ok(out)
}

/// Resets the lease; during the restart grace a holder that lost the lock
/// in a restart gets it back.
pub fn extend(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    now: i64,
) -> Result<(), Error> {
    let mut key = Key::write(ctx, name);
    let effect = {
        let cur = key.value::<Lock>()?;
        match lock::extend(name.as_slice(), cur.as_deref(), holder, ttl_ms, now) {
            Err(Error::NotHeld { .. }) if cur.is_none() && grace_running(now, ttl_ms) => {
                fences::with(|f| lock::recreate(holder, ttl_ms, now, f))?
            }
            other => other?,
        }
    };
    commit(
        ctx,
        name,
        key,
        effect,
        Note::new(&Lock::INFO.counters.extended, None),
    );
    Ok(())
}

impl super::Kind for Lock {
    const RENEW: keep::Renew = renew;
    fn kept(&self, key_expire: Option<i64>) -> Vec<(Vec<u8>, i64)> {
        key_expire
            .and_then(crate::core::keep::kept_ttl)
            .map(|t| (self.holder.to_vec(), t))
            .into_iter()
            .collect()
    }

    fn lease_end(&self, holder: &[u8], key_expire: Option<i64>) -> Option<i64> {
        (*self.holder == *holder).then_some(key_expire.unwrap_or(keep::NO_END))
    }
}
