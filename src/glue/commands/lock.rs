//! `LOCK.*`: parse, open the key, let `core::lock` decide, apply and
//! replicate the effect, reply.

use redis_module::{Context, RedisString, RedisValue};

use crate::core::args::{self, Arg};
use crate::core::error::Error;
use crate::core::lock::{self, Effect, Grant, Lock};
use crate::glue::config::{grace_running, limits};
use crate::glue::info::{self, bump};
use crate::glue::key::Key;
use crate::glue::waiting::{self, Want};
use crate::glue::{fences, notify, now_ms, replicate};

use super::{grant_or_wait, Wait};

/// Writes `effect` to the key and sends the same state to replicas.
pub(crate) fn apply(ctx: &Context, name: &RedisString, key: &mut Key, effect: Effect) {
    match effect {
        Effect::Put { lock, deadline_ms } => {
            replicate::lock_set(ctx, name, &lock, deadline_ms);
            key.put(lock);
            key.set_expire_at(deadline_ms);
        }
        Effect::Touch { count, deadline_ms } => {
            let deadline = match deadline_ms {
                Some(d) => {
                    key.set_expire_at(d);
                    d
                }
                None => key.expire_at().unwrap_or(0),
            };
            if let Ok(Some(l)) = key.lock() {
                l.count = count;
                replicate::lock_set(ctx, name, l, deadline);
            }
            key.modified();
        }
        Effect::Free => {
            key.delete();
            replicate::del(ctx, name);
        }
    }
}

fn count_grant(g: &Grant) {
    bump(if g.fresh {
        &info::ACQUIRED
    } else {
        &info::REENTERED
    });
}

/// Tries to take one lock for `holder` now; None when someone else has it.
pub(crate) fn try_acquire(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    ttl_ms: i64,
    now: i64,
) -> Result<Option<Grant>, Error> {
    let mut key = Key::write(ctx, name);
    let decided = {
        let cur = key.lock()?;
        if cur.is_none() && grace_running(now, ttl_ms) {
            return Err(Error::TryAgain);
        }
        fences::with(|f| lock::acquire(cur.as_deref(), holder, ttl_ms, now, f))?
    };
    let Some((grant, effect)) = decided else {
        return Ok(None);
    };
    apply(ctx, name, &mut key, effect);
    count_grant(&grant);
    notify(ctx, c"lock.acquire", name);
    waiting::acquired(ctx, holder, name);
    Ok(Some(grant))
}

/// With waiters queued, a key belongs to the head of its queue: only the
/// current holder may still reenter it.
fn open_to(ctx: &Context, name: &RedisString, holder: &[u8]) -> Result<bool, Error> {
    if !waiting::has_waiters(ctx, name) {
        return Ok(true);
    }
    let mut key = Key::read(ctx, name);
    Ok(key.lock()?.is_some_and(|l| *l.holder == *holder))
}

pub fn acquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::lock_acquire(&args[1..], &limits())?;
    let attempt = match open_to(ctx, req.key, req.holder)? {
        true => try_acquire(ctx, req.key, req.holder, req.ttl_ms, now_ms()),
        false => Ok(None),
    };
    let reply = |g: Grant| {
        waiting::after_write(ctx, req.key);
        RedisValue::Integer(g.fence as i64)
    };
    let wait = Wait {
        holder: req.holder,
        keys: std::slice::from_ref(req.key),
        want: Want::Lock { ttl_ms: req.ttl_ms },
        block_ms: req.block_ms,
    };
    grant_or_wait(ctx, attempt, reply, &info::CONTENDED, wait)
}

pub fn reenter(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl(&args[1..], &limits())?;
    let mut key = Key::write(ctx, req.key);
    let (count, effect) = {
        let cur = key.lock()?;
        lock::reenter(
            req.key.bytes(),
            cur.as_deref(),
            req.holder,
            req.ttl_ms,
            now_ms(),
        )?
    };
    apply(ctx, req.key, &mut key, effect);
    drop(key);
    bump(&info::REENTERED);
    waiting::after_write(ctx, req.key);
    Ok(RedisValue::Integer(count as i64))
}

pub fn release(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder(&args[1..], &limits())?;
    let count = release_one(ctx, req.key, req.holder, None)?;
    Ok(RedisValue::Integer(count as i64))
}

/// One release by `holder` (only of the grant with `fence`, when given);
/// the next waiter is served when the lock becomes free.
fn release_one(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    fence: Option<u64>,
) -> Result<u64, Error> {
    let mut key = Key::write(ctx, name);
    let (count, effect) = {
        let cur = key.lock()?.filter(|l| fence.is_none_or(|f| l.fence == f));
        lock::release(name.bytes(), cur.as_deref(), holder)?
    };
    apply(ctx, name, &mut key, effect);
    drop(key);
    bump(&info::RELEASED);
    notify(ctx, c"lock.release", name);
    waiting::after_write(ctx, name);
    Ok(count)
}

/// Takes back a grant whose reply never reached its client.
pub(crate) fn undo_grant(ctx: &Context, name: &RedisString, holder: &[u8], fence: u64) {
    let _ = release_one(ctx, name, holder, Some(fence));
}

pub fn extend(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl(&args[1..], &limits())?;
    let mut key = Key::write(ctx, req.key);
    let now = now_ms();
    let effect = {
        let cur = key.lock()?;
        match lock::extend(req.key.bytes(), cur.as_deref(), req.holder, req.ttl_ms, now) {
            // A holder from before a restart that lost the lock gets it back.
            Err(Error::NotHeld { .. }) if cur.is_none() && grace_running(now, req.ttl_ms) => {
                fences::with(|f| lock::recreate(req.holder, req.ttl_ms, now, f))
            }
            other => other?,
        }
    };
    apply(ctx, req.key, &mut key, effect);
    drop(key);
    bump(&info::EXTENDED);
    waiting::after_write(ctx, req.key);
    Ok(RedisValue::Integer(1))
}

/// ms left on a key's lease; -1 when it has no expiry (someone PERSISTed
/// it), like `PTTL`.
pub(crate) fn ttl_left(key: &Key, now: i64) -> i64 {
    key.expire_at().map_or(-1, |at| (at - now).max(0))
}

pub fn info(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let name = args::key_only(&args[1..])?;
    let mut key = Key::read(ctx, name);
    let now = now_ms();
    let ttl = ttl_left(&key, now);
    let Some(l) = key.lock()? else {
        return Ok(RedisValue::Null);
    };
    let l: &Lock = l;
    Ok(crate::glue::map(vec![
        ("holder", RedisValue::StringBuffer(l.holder.to_vec())),
        ("count", RedisValue::Integer(l.count as i64)),
        ("fence", RedisValue::Integer(l.fence as i64)),
        ("ttl", RedisValue::Integer(ttl)),
        ("waiters", RedisValue::Integer(waiting::waiters(ctx, name))),
    ]))
}

/// Declares the keys of `numkeys key [key ...]` commands to cluster routing,
/// ACL and `COMMAND GETKEYS`. Returns true when this call was only that.
fn declare_keys(ctx: &Context, args: &[RedisString]) -> bool {
    if !ctx.is_keys_position_request() {
        return false;
    }
    let n = args
        .get(1)
        .and_then(|a| args::parse_int(a.bytes()))
        .unwrap_or(0)
        .clamp(0, args.len() as i64 - 2);
    for pos in 2..2 + n {
        ctx.key_at_pos(pos as i32);
    }
    true
}

pub fn macquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    if declare_keys(ctx, args) {
        return Ok(RedisValue::NoReply);
    }
    let req = args::lock_macquire(&args[1..], &limits())?;
    let mut open = true;
    for k in req.keys {
        open &= open_to(ctx, k, req.holder)?;
    }
    let attempt = match open {
        true => try_macquire(ctx, req.keys, req.holder, req.ttl_ms, now_ms()),
        false => Ok(None),
    };
    let reply = |fences: Vec<u64>| {
        for k in req.keys {
            waiting::after_write(ctx, k);
        }
        RedisValue::Array(
            fences
                .into_iter()
                .map(|f| RedisValue::Integer(f as i64))
                .collect(),
        )
    };
    let wait = Wait {
        holder: req.holder,
        keys: req.keys,
        want: Want::Multi { ttl_ms: req.ttl_ms },
        block_ms: req.block_ms,
    };
    grant_or_wait(ctx, attempt, reply, &info::CONTENDED, wait)
}

/// All of `names` for `holder` now, or nothing.
pub(crate) fn try_macquire(
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
            .map(|k| k.lock().map(|l| l.map(|l| &*l)))
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
    for ((grant, effect), (key, name)) in steps.into_iter().zip(keys.iter_mut().zip(names)) {
        apply(ctx, name, key, effect);
        count_grant(&grant);
        notify(ctx, c"lock.acquire", name);
        out.push(grant.fence);
    }
    drop(keys);
    for name in names {
        waiting::acquired(ctx, holder, name);
    }
    Ok(Some(out))
}

pub fn mrelease(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    if declare_keys(ctx, args) {
        return Ok(RedisValue::NoReply);
    }
    let req = args::lock_mrelease(&args[1..], &limits())?;
    let mut keys: Vec<Key> = req.keys.iter().map(|n| Key::write(ctx, n)).collect();
    let steps = {
        let cur = keys
            .iter_mut()
            .map(|k| k.lock().map(|l| l.map(|l| &*l)))
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<&[u8]> = req.keys.iter().map(|k| k.bytes()).collect();
        lock::mrelease(&names, &cur, req.holder)?
    };
    let mut out = Vec::with_capacity(steps.len());
    for ((count, effect), (key, name)) in steps.into_iter().zip(keys.iter_mut().zip(req.keys)) {
        apply(ctx, name, key, effect);
        bump(&info::RELEASED);
        notify(ctx, c"lock.release", name);
        out.push(RedisValue::Integer(count as i64));
    }
    drop(keys);
    for name in req.keys {
        waiting::after_write(ctx, name);
    }
    Ok(RedisValue::Array(out))
}

pub fn waitfor(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl(&args[1..], &limits())?;
    waiting::waitfor(ctx, req.holder, req.key, req.ttl_ms)
}

pub fn graph(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    if args.len() != 1 {
        return Err(Error::Arity);
    }
    Ok(waiting::graph(ctx))
}
