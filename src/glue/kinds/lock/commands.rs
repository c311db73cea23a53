//! `LOCK.*`: parse, call `kinds::lock` or the waiting engine, reply.

use redis_module::{Context, RedisString, RedisValue};

use crate::core::args;
use crate::core::error::Error;
use crate::core::keep::ttl_left;
use crate::core::lock::Grant;
use crate::core::lock::Lock;
use crate::glue::commands::spec::{
    commands, Ids, Keys, COUNTED_GRANT, GIVE_BACK, LOOK, ONE_GRANT, ONE_RENEW, RENEW,
};
use crate::glue::commands::{declare_keys, grant_or_wait, keeping, mailbox_of, try_now, Wait};
use crate::glue::config::{gave_back, give_back_args, limits, within_max_holder};
use crate::glue::eviction;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::kinds::lock as kind;
use crate::glue::server::{map, now_ms};
use crate::glue::types::Value;
use crate::glue::waiting::{self, Attempt, Try};

commands! {
    c"lock.acquire" => acquire, c"write deny-oom fast", (1, 1, 1), "write fast",
        "Acquires (or reenters) a lock with a lease; replies its fencing token, nil when held by another holder.",
        "O(1)", "key holder ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]", Keys::Mailbox(&ONE_GRANT, 4), ids = Ids::After(3);
    c"lock.reenter" => reenter, c"write deny-oom fast", (1, 1, 1), "write fast",
        "Reenters a lock the holder already holds; replies the new reentry count.",
        "O(1)", "key holder ttl-ms [KEEP] [ID request-id]", Keys::One(RENEW), ids = Ids::After(3);
    c"lock.release" => release, c"write fast", (1, 1, 1), "write fast",
        "Releases one reentry of a lock; replies the count left, 0 when the lock is free.",
        "O(1)", "key holder [ID request-id]", Keys::One(GIVE_BACK), ids = Ids::After(2);
    c"lock.extend" => extend, c"write fast", (1, 1, 1), "write fast",
        "Resets the lease of a held lock.",
        "O(1)", "key holder ttl-ms [KEEP [MAILBOX mailbox-key]] [ID request-id]", Keys::Mailbox(&ONE_RENEW, 4), ids = Ids::After(3);
    c"lock.info" => info, c"readonly fast", (1, 1, 1), "read fast",
        "Shows a lock's holder, count, fence, lease left, waiters and keep.",
        "O(1)", "key", Keys::One(LOOK);
    c"lock.macquire" => macquire, c"write deny-oom getkeys-api", (0, 0, 0), "write",
        "Acquires several locks all at once or none; replies their fences.",
        "O(N) where N is the number of keys", "numkeys key [key ...] holder ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]", Keys::Mailbox(&COUNTED_GRANT, 4), ids = Ids::AfterKeys(2);
    c"lock.mrelease" => mrelease, c"write getkeys-api", (0, 0, 0), "write",
        "Releases one reentry of each of several locks, all or none; replies the counts left.",
        "O(N) where N is the number of keys", "numkeys key [key ...] holder [ID request-id]", Keys::Counted(GIVE_BACK), ids = Ids::AfterKeys(1);
    c"lock.cancel" => cancel, c"write fast", (1, 1, 1), "write fast",
        "Takes a queued request (MAILBOX or BLOCK) out of its queue by its request-id; replies 1 if it was still queued.",
        "O(1)", "key holder request-id", Keys::One(GIVE_BACK);
    c"lock.waitfor" => waitfor, c"write deny-oom fast", (1, 1, 1), "write fast",
        "Declares that a holder waits for a key (deadlock detection for clients that wait on their own side).",
        "O(E) where E is the number of wait edges reachable from the key", "key holder ttl-ms", Keys::One(LOOK);
    c"lock.graph" => graph, c"readonly", (0, 0, 0), "read",
        "Shows the wait-for graph: waiter, key, holders, ms left and database per edge, for keys the caller may read.",
        "O(E) where E is the number of wait edges", "[COUNT n]", Keys::None;
    c"lock.top" => top, c"readonly", (0, 0, 0), "read",
        "Lists the keys with the most waiters now (key, kind, waiters, oldest wait, holders, database), for keys the caller may read.",
        "O(K log K) where K is the number of keys with waiters", "[COUNT n]", Keys::None;
}

pub fn acquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = crate::core::lock::args::lock_acquire(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    let mailbox = mailbox_of(ctx, req.key, req.mailbox)?;
    eviction::check_acquire(ctx)?;
    let keep = (client, req.ttl_ms, kind::renew as keep::Renew);
    keeping((req.key, req.holder), keep, mailbox, |mailbox| {
        acquire_bound(ctx, &req, client, mailbox)
    })
}

/// `LOCK.ACQUIRE` past its checks (a `KEEP` grant binds as it is written).
fn acquire_bound(
    ctx: &Context,
    req: &crate::core::lock::args::LockAcquire<RedisString>,
    client: Option<u64>,
    mailbox: Option<(&RedisString, crate::glue::mailbox::Mail)>,
) -> Result<RedisValue, Error> {
    let at = try_now(req.block_ms);
    let attempt = match kind::closed_to(ctx, req.key, req.holder, at)? {
        None => kind::try_acquire(ctx, req.key, req.holder, req.ttl_ms, at),
        Some(refused) => Ok(refused),
    };
    let wait = Wait {
        holder: req.holder,
        keys: std::slice::from_ref(req.key),
        block_ms: req.block_ms,
        mailbox,
    };
    let reply = |g: Grant| {
        kind::keep(ctx, req.key, req.holder, client, req.ttl_ms, g.fence);
        RedisValue::Integer(g.fence as i64)
    };
    grant_or_wait(
        ctx,
        attempt,
        reply,
        &Lock::INFO.counters.contended,
        wait,
        || kind::want_one(req.ttl_ms, client),
    )
}

pub fn reenter(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl_keep(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    eviction::check_acquire(ctx)?;
    let count = kind::reenter(ctx, req.key, req.holder, req.ttl_ms, now_ms())?;
    kind::keep_held(ctx, req.key, req.holder, client, req.ttl_ms);
    Ok(RedisValue::Integer(count as i64))
}

pub fn release(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = give_back_args(|l| args::key_holder(&args[1..], l))?;
    let count = gave_back(req.holder, kind::release(ctx, req.key, req.holder, None))?;
    Ok(RedisValue::Integer(count as i64))
}

pub fn extend(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl_extend(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    // Checked before the extend: nothing half-done.
    let mail = mailbox_of(ctx, req.key, req.mailbox)?.map(|(_, m)| m);
    kind::extend(ctx, req.key, req.holder, req.ttl_ms, now_ms())?;
    keep::losses_to(mail, || {
        kind::keep_held(ctx, req.key, req.holder, client, req.ttl_ms)
    });
    Ok(RedisValue::Integer(1))
}

pub fn info(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let name = args::key_only(&args[1..])?;
    let mut key = Key::read(ctx, name);
    // -1 when the key has no expiry (someone PERSISTed it), like `PTTL`.
    let ttl = key.expire_at().map_or(-1, |at| ttl_left(at, now_ms()));
    let Some(l) = key.value::<Lock>()? else {
        return Ok(RedisValue::Null);
    };
    let keep_flag = i64::from(keep::is_bound(ctx, name, &l.holder));
    Ok(map(vec![
        ("holder", RedisValue::StringBuffer(l.holder.to_vec())),
        ("count", RedisValue::Integer(l.count as i64)),
        ("fence", RedisValue::Integer(l.fence as i64)),
        ("ttl", RedisValue::Integer(ttl)),
        ("waiters", RedisValue::Integer(waiting::waiters(ctx, name))),
        ("queue", waiting::queue(ctx, name)),
        ("keep", RedisValue::Integer(keep_flag)),
    ]))
}

pub fn macquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    if declare_keys(ctx, args, 2) {
        return Ok(RedisValue::NoReply);
    }
    let req = crate::core::lock::args::lock_macquire(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    let mailbox = mailbox_of(ctx, &req.keys[0], req.mailbox)?;
    eviction::check_acquire(ctx)?;
    // Each key's refusal alone (none will wait on what it saw).
    let alone = Try {
        now: now_ms(),
        block: false,
    };
    let mut open = true;
    for k in req.keys {
        open &= kind::closed_to(ctx, k, req.holder, alone)?.is_none();
    }
    let attempt = match open {
        true => {
            kind::try_macquire(ctx, req.keys, req.holder, req.ttl_ms, now_ms()).map(Attempt::from)
        }
        false => Ok(Attempt::Refused(None)),
    };
    // The keys' bindings are made by the reply (no `keeping` scope here):
    // they report their loss to the mailbox.
    let mail = mailbox.as_ref().map(|(_, m)| m.clone());
    let reply = |fences: Vec<u64>| {
        keep::losses_to(mail, || {
            for (name, fence) in req.keys.iter().zip(&fences) {
                kind::keep(ctx, name, req.holder, client, req.ttl_ms, *fence);
            }
        });
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
        block_ms: req.block_ms,
        mailbox,
    };
    grant_or_wait(
        ctx,
        attempt,
        reply,
        &Lock::INFO.counters.contended,
        wait,
        || kind::want_multi(req.ttl_ms, client),
    )
}

pub fn mrelease(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    if declare_keys(ctx, args, 1) {
        return Ok(RedisValue::NoReply);
    }
    let req = give_back_args(|l| crate::core::lock::args::lock_mrelease(&args[1..], l))?;
    let counts = gave_back(req.holder, kind::mrelease(ctx, req.keys, req.holder))?;
    Ok(RedisValue::Array(
        counts
            .into_iter()
            .map(|c| RedisValue::Integer(c as i64))
            .collect(),
    ))
}

pub fn cancel(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = give_back_args(|l| args::lock_cancel(&args[1..], l))?;
    let was_queued = waiting::cancel(ctx, req.key, req.holder, req.request_id);
    if !was_queued {
        within_max_holder(req.holder)?;
    }
    Ok(RedisValue::Integer(i64::from(was_queued)))
}

pub fn waitfor(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl(&args[1..], &limits())?;
    waiting::waitfor(ctx, req.holder, req.key, req.ttl_ms)
}

pub fn top(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let count = args::top(&args[1..])?;
    Ok(waiting::top(ctx, count))
}

pub fn graph(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let count = args::graph(&args[1..])?;
    Ok(waiting::graph(ctx, count))
}

impl crate::glue::commands::Family for crate::core::lock::Lock {
    const COMMANDS: &'static [crate::glue::commands::spec::Command] = COMMANDS;
}
