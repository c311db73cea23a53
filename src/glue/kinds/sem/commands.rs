//! `SEM.*`: parse, call `kinds::sem` or the waiting engine, reply.

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisString, RedisValue};

use crate::core::args;
use crate::core::error::Error;
use crate::core::semaphore::Semaphore;
use crate::glue::commands::spec::{commands, Ids, Keys, GIVE_BACK, LOOK, ONE_GRANT, ONE_RENEW};
use crate::glue::commands::{grant_or_wait, keeping, mailbox_of, try_now, Wait};
use crate::glue::config::{gave_back, give_back_args, limits};
use crate::glue::eviction;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::kinds::sem as kind;
use crate::glue::server::{map, now_ms};
use crate::glue::types::Value;
use crate::glue::waiting;

commands! {
    c"sem.acquire" => acquire, c"write deny-oom fast", (1, 1, 1), "write fast",
        "Takes permits of a counting semaphore with a lease per holder; replies the permits the holder holds, nil when not enough are free.",
        "O(log N) where N is the number of holders", "key holder limit ttl-ms [PERMITS n] [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]", Keys::Mailbox(&ONE_GRANT, 5), ids = Ids::After(4);
    c"sem.release" => release, c"write fast", (1, 1, 1), "write fast",
        "Gives back permits of a semaphore (all by default); replies the permits left.",
        "O(log N) where N is the number of holders", "key holder [PERMITS n] [ID request-id]", Keys::One(GIVE_BACK), ids = Ids::After(2);
    c"sem.extend" => extend, c"write fast", (1, 1, 1), "write fast",
        "Resets a semaphore holder's lease.",
        "O(log N) where N is the number of holders", "key holder ttl-ms [PERMITS n] [KEEP [MAILBOX mailbox-key]] [ID request-id]", Keys::Mailbox(&ONE_RENEW, 4), ids = Ids::After(3);
    c"sem.info" => info, c"readonly", (1, 1, 1), "read",
        "Shows a semaphore's limit, used and available permits, holders, waiters and keep.",
        "O(N) where N is the number of holders", "key", Keys::One(LOOK);
}

pub fn acquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = crate::core::semaphore::args::sem_acquire(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    let mailbox = mailbox_of(ctx, req.key, req.mailbox)?;
    eviction::check_acquire(ctx)?;
    let keep = (client, req.ttl_ms, kind::renew as keep::Renew);
    keeping((req.key, req.holder), keep, mailbox, |mailbox| {
        acquire_bound(ctx, &req, client, mailbox)
    })
}

/// `SEM.ACQUIRE` past its checks (a `KEEP` grant binds as it is written).
fn acquire_bound(
    ctx: &Context,
    req: &crate::core::semaphore::args::SemAcquire<RedisString>,
    client: Option<u64>,
    mailbox: Option<(&RedisString, crate::glue::mailbox::Mail)>,
) -> Result<RedisValue, Error> {
    // With waiters queued nobody overtakes them, whatever they ask for.
    let at = try_now(req.block_ms);
    let attempt = if waiting::has_waiters(ctx, req.key) {
        kind::refused_behind_queue(ctx, req.key, req.holder, at)
    } else {
        let (limit, n) = (req.limit, req.permits);
        kind::try_acquire(ctx, req.key, req.holder, limit, n, req.ttl_ms, at)
    };
    let wait = Wait {
        holder: req.holder,
        keys: std::slice::from_ref(req.key),
        block_ms: req.block_ms,
        mailbox,
    };
    let reply = |total: u64| {
        kind::keep(ctx, req.key, req.holder, client, req.ttl_ms);
        RedisValue::Integer(total as i64)
    };
    grant_or_wait(
        ctx,
        attempt,
        reply,
        &Semaphore::INFO.counters.contended,
        wait,
        || kind::want(req.limit, req.permits, req.ttl_ms, client),
    )
}

pub fn release(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = give_back_args(|l| crate::core::semaphore::args::sem_release(&args[1..], l))?;
    // Sent as itself by the master: its other holders are the master's.
    let now = (!crate::glue::requests::rider::runs_again(ctx)).then(now_ms);
    let left = gave_back(
        req.holder,
        kind::release(ctx, req.key, req.holder, req.permits, now),
    )?;
    Ok(RedisValue::Integer(left as i64))
}

pub fn extend(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = crate::core::semaphore::args::sem_extend(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    // Checked before the extend: nothing half-done.
    let mail = mailbox_of(ctx, req.key, req.mailbox)?.map(|(_, m)| m);
    kind::extend(ctx, req.key, req.holder, req.ttl_ms, req.permits, now_ms())?;
    keep::losses_to(mail, || {
        kind::keep(ctx, req.key, req.holder, client, req.ttl_ms)
    });
    Ok(RedisValue::Integer(1))
}

pub fn info(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let name = args::key_only(&args[1..])?;
    let mut key = Key::read(ctx, name);
    let Some(sem) = key.value::<Semaphore>()? else {
        return Ok(RedisValue::Null);
    };
    let view = sem.view(now_ms());
    if view.holders.is_empty() {
        // Every lease ran out; the master removes the key on its next write.
        return Ok(RedisValue::Null);
    }
    let bound = view
        .holders
        .iter()
        .filter(|(h, _, _)| keep::is_bound(ctx, name, h))
        .count();
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
    Ok(map(vec![
        ("limit", RedisValue::Integer(view.limit as i64)),
        ("used", RedisValue::Integer(view.used as i64)),
        ("available", RedisValue::Integer(view.available as i64)),
        ("holders", RedisValue::OrderedMap(holders)),
        ("waiters", RedisValue::Integer(waiting::waiters(ctx, name))),
        ("queue", waiting::queue(ctx, name)),
        ("keep", RedisValue::Integer(bound as i64)),
    ]))
}

impl crate::glue::commands::Family for crate::core::semaphore::Semaphore {
    const COMMANDS: &'static [crate::glue::commands::spec::Command] = COMMANDS;
}
