//! `SEM.*`: per-holder leases inside one key. Holders whose lease ran out
//! are removed (and the removal replicated) by the master before any change,
//! so replicas never expire holders by their own clock.

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisString, RedisValue};

use crate::core::args::{self, Arg};
use crate::core::error::Error;
use crate::core::semaphore::Semaphore;
use crate::glue::config::{grace_running, limits};
use crate::glue::info::{self, bump};
use crate::glue::key::Key;
use crate::glue::waiting::{self, Want};
use crate::glue::{notify, now_ms, replicate};

use super::{grant_or_wait, Wait};

/// Who changes a semaphore: a client command by `holder` at `now` (holders
/// whose lease ended are removed first, and the holder's new state is
/// replicated afterwards), or a replicated effect (`None`: nothing read
/// from the clock, nothing replicated here).
pub(crate) type By<'h> = Option<(&'h [u8], i64)>;

/// Runs `f` on the semaphore at `name` (a new one with `new_limit` when
/// the key is empty), then stores, re-times or deletes the key to match,
/// and replicates what changed.
pub(crate) fn change<R>(
    ctx: &Context,
    name: &RedisString,
    by: By<'_>,
    new_limit: u64,
    f: impl FnOnce(&mut Semaphore) -> Result<R, Error>,
) -> Result<R, Error> {
    let mut key = Key::write(ctx, name);
    let mut fresh = None;
    let (result, changed, empty, latest) = {
        let sem = match key.sem()? {
            Some(s) => s,
            None => fresh.insert(Semaphore::new(new_limit)),
        };
        let before = sem.changes();
        if let Some((_, now)) = by {
            for holder in sem.expire(now) {
                replicate::sem_set(ctx, name, &holder, sem.limit(), 0, 0);
                bump(&info::SEM_EXPIRED_HOLDERS);
                bump(&info::EXPIRED);
            }
        }
        let result = f(sem);
        let changed = sem.changes() != before;
        if let (Some((holder, _)), Ok(_), true) = (by, &result, changed) {
            let (permits, deadline) = sem
                .holder(holder)
                .map_or((0, 0), |e| (e.permits, e.deadline_ms));
            replicate::sem_set(ctx, name, holder, sem.limit(), permits, deadline);
        }
        (result, changed, sem.is_empty(), sem.latest_deadline())
    };
    match (fresh, empty, latest) {
        (Some(s), false, Some(at)) => {
            key.put(s);
            key.set_expire_at(at);
        }
        (None, true, _) => key.delete(),
        (None, false, Some(at)) if changed => key.set_expire_at(at),
        _ => {}
    }
    result
}

/// Tries to take `permits` for `holder` now; None when not enough are free.
pub(crate) fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    ttl_ms: i64,
    now: i64,
) -> Result<Option<u64>, Error> {
    let got = change(ctx, name, Some((holder, now)), limit, |s| {
        if s.fits(limit, permits) && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        Ok(s.acquire(holder, limit, permits, ttl_ms, now))
    })?;
    if got.is_some() {
        bump(&info::SEM_ACQUIRED);
        notify(ctx, c"sem.acquire", name);
        waiting::acquired(ctx, holder, name);
    }
    Ok(got)
}

pub fn acquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::sem_acquire(&args[1..], &limits())?;
    // With waiters queued nobody overtakes them, whatever they ask for.
    let attempt = if waiting::has_waiters(ctx, req.key) {
        // Still a write: holders whose lease ran out leave now.
        waiting::after_write(ctx, req.key);
        Ok(None)
    } else {
        let (limit, n) = (req.limit, req.permits);
        try_acquire(ctx, req.key, req.holder, limit, n, req.ttl_ms, now_ms())
    };
    let reply = |total: u64| RedisValue::Integer(total as i64);
    let wait = Wait {
        holder: req.holder,
        keys: std::slice::from_ref(req.key),
        want: Want::Sem {
            limit: req.limit,
            permits: req.permits,
            ttl_ms: req.ttl_ms,
        },
        block_ms: req.block_ms,
    };
    grant_or_wait(ctx, attempt, reply, &info::SEM_CONTENDED, wait)
}

pub fn release(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::sem_release(&args[1..], &limits())?;
    let left = release_permits(ctx, req.key, req.holder, req.permits)?;
    Ok(RedisValue::Integer(left as i64))
}

/// Gives back `permits` (None: all) of `holder`; waiters are served.
fn release_permits(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    permits: Option<u64>,
) -> Result<u64, Error> {
    let left = change(ctx, name, Some((holder, now_ms())), 0, |s| {
        s.release(name.bytes(), holder, permits)
    })?;
    bump(&info::SEM_RELEASED);
    notify(ctx, c"sem.release", name);
    waiting::after_write(ctx, name);
    Ok(left)
}

/// Takes back permits whose grant never reached its client.
pub(crate) fn undo_grant(ctx: &Context, name: &RedisString, holder: &[u8], permits: u64) {
    let _ = release_permits(ctx, name, holder, Some(permits));
}

pub fn extend(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::sem_extend(&args[1..], &limits())?;
    let now = now_ms();
    change(ctx, req.key, Some((req.holder, now)), 0, |s| {
        match s.extend(req.key.bytes(), req.holder, req.ttl_ms, now) {
            // A holder from before a restart that lost it gets its permits back.
            Err(Error::NotHeld { .. }) if grace_running(now, req.ttl_ms) => {
                s.recreate(req.holder, req.permits.unwrap_or(1), req.ttl_ms, now);
                Ok(())
            }
            other => other,
        }
    })?;
    bump(&info::SEM_EXTENDED);
    waiting::after_write(ctx, req.key);
    Ok(RedisValue::Integer(1))
}

pub fn info(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let name = args::key_only(&args[1..])?;
    let mut key = Key::read(ctx, name);
    let Some(sem) = key.sem()? else {
        return Ok(RedisValue::Null);
    };
    let view = sem.view(now_ms());
    if view.holders.is_empty() {
        // Every lease ran out; the master removes the key on its next write.
        return Ok(RedisValue::Null);
    }
    let holders = view
        .holders
        .into_iter()
        .map(|(h, permits, ttl)| {
            (
                RedisValueKey::BulkString(h),
                RedisValue::Array(vec![
                    RedisValue::Integer(permits as i64),
                    RedisValue::Integer(ttl),
                ]),
            )
        })
        .collect();
    Ok(crate::glue::map(vec![
        ("limit", RedisValue::Integer(view.limit as i64)),
        ("used", RedisValue::Integer(view.used as i64)),
        ("available", RedisValue::Integer(view.available as i64)),
        ("holders", RedisValue::OrderedMap(holders)),
        ("waiters", RedisValue::Integer(waiting::waiters(ctx, name))),
    ]))
}
