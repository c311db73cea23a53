//! `RWLOCK.*`: parse, call `kinds::rwlock` or the waiting engine, reply.

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisString, RedisValue};

use crate::core::args;
use crate::core::error::Error;
use crate::core::keep::ttl_left;
use crate::core::rwlock::{Grant, Mode, RwLock};
use crate::glue::commands::spec::{commands, Ids, Keys, GIVE_BACK, LOOK, ONE_GRANT, ONE_RENEW};
use crate::glue::commands::{grant_or_wait, keeping, mailbox_of, try_now, Wait};
use crate::glue::config::{gave_back, give_back_args, limits};
use crate::glue::eviction;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::kinds::rwlock as kind;
use crate::glue::server::{map, now_ms};
use crate::glue::types::Value;
use crate::glue::waiting::{self, Attempt};

commands! {
    c"rwlock.acquire" => acquire, c"write deny-oom fast", (1, 1, 1), "write fast",
        "Takes a read or write hold of a fair read-write lock; replies the holder's fence, nil when refused.",
        "O(log N) where N is the number of holders", "key holder READ|WRITE ttl-ms [BLOCK timeout-ms [MAILBOX mailbox-key]] [KEEP] [ID request-id]", Keys::Mailbox(&ONE_GRANT, 5), ids = Ids::After(4);
    c"rwlock.release" => release, c"write fast", (1, 1, 1), "write fast",
        "Releases one read or write hold; replies [reads, writes] left.",
        "O(log N) where N is the number of holders", "key holder READ|WRITE [ID request-id]", Keys::One(GIVE_BACK), ids = Ids::After(3);
    c"rwlock.extend" => extend, c"write fast", (1, 1, 1), "write fast",
        "Resets a read-write lock holder's lease.",
        "O(log N) where N is the number of holders", "key holder ttl-ms [KEEP [MAILBOX mailbox-key]] [ID request-id]", Keys::Mailbox(&ONE_RENEW, 4), ids = Ids::After(3);
    c"rwlock.info" => info, c"readonly", (1, 1, 1), "read",
        "Shows a read-write lock's mode, holders, waiters and keep.",
        "O(N) where N is the number of holders", "key", Keys::One(LOOK);
}

pub fn acquire(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = crate::core::rwlock::args::rw_acquire(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    let mailbox = mailbox_of(ctx, req.key, req.mailbox)?;
    eviction::check_acquire(ctx)?;
    let keep = (client, req.ttl_ms, kind::renew as keep::Renew);
    keeping((req.key, req.holder), keep, mailbox, |mailbox| {
        acquire_bound(ctx, &req, client, mailbox)
    })
}

/// `RWLOCK.ACQUIRE` past its checks (a `KEEP` grant binds as it is written).
fn acquire_bound(
    ctx: &Context,
    req: &crate::core::rwlock::args::RwHold<RedisString>,
    client: Option<u64>,
    mailbox: Option<(&RedisString, crate::glue::mailbox::Mail)>,
) -> Result<RedisValue, Error> {
    // With requests queued a newcomer goes behind them; a holder adding a
    // read hold, the writer reentering and an upgrade do not.
    let queued = waiting::has_waiters(ctx, req.key);
    let (key, holder, mode) = (req.key, req.holder, req.mode);
    let at = try_now(req.block_ms);
    let attempt = kind::try_acquire(ctx, key, holder, mode, queued, req.ttl_ms, at);
    // A refused WRITE by a holder of the key is an upgrade (a writer's own
    // WRITE is always granted): known from what the attempt saw.
    let upgrade_seen = match &attempt {
        Ok(Attempt::Refused(Some(seen))) => {
            Some(mode == Mode::Write && seen.held.holders().any(|h| h == holder))
        }
        _ => None,
    };
    let wait = Wait {
        holder,
        keys: std::slice::from_ref(key),
        block_ms: req.block_ms,
        mailbox,
    };
    let reply = |g: Grant| {
        kind::keep(ctx, key, holder, client, req.ttl_ms);
        RedisValue::Integer(g.fence as i64)
    };
    grant_or_wait(
        ctx,
        attempt,
        reply,
        &RwLock::INFO.counters.contended,
        wait,
        || {
            let upgrade = upgrade_seen.unwrap_or_else(|| kind::is_upgrade(ctx, key, holder, mode));
            kind::want(mode, req.ttl_ms, upgrade, client)
        },
    )
}

pub fn release(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = give_back_args(|l| crate::core::rwlock::args::rw_release(&args[1..], l))?;
    // Sent as itself by the master: its other holders are the master's.
    let now = (!crate::glue::requests::rider::runs_again(ctx)).then(now_ms);
    let (reads, writes) = gave_back(
        req.holder,
        kind::release(ctx, req.key, req.holder, req.mode, None, now),
    )?;
    Ok(RedisValue::Array(vec![
        RedisValue::Integer(reads as i64),
        RedisValue::Integer(writes as i64),
    ]))
}

pub fn extend(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let req = args::key_holder_ttl_extend(&args[1..], &limits())?;
    let client = keep::client(ctx, req.keep, req.ttl_ms)?;
    // Checked before the extend: nothing half-done.
    let mail = mailbox_of(ctx, req.key, req.mailbox)?.map(|(_, m)| m);
    kind::extend(ctx, req.key, req.holder, req.ttl_ms, now_ms())?;
    keep::losses_to(mail, || {
        kind::keep(ctx, req.key, req.holder, client, req.ttl_ms)
    });
    Ok(RedisValue::Integer(1))
}

pub fn info(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    let name = args::key_only(&args[1..])?;
    let mut key = Key::read(ctx, name);
    let Some(rw) = key.value::<RwLock>()? else {
        return Ok(RedisValue::Null);
    };
    let now = now_ms();
    let mut writes = false;
    let mut bound = 0;
    let holders: std::collections::BTreeMap<_, _> = rw
        .live(now)
        .map(|(h, e)| {
            writes |= e.writes > 0;
            bound += i64::from(keep::is_bound(ctx, name, h));
            (
                RedisValueKey::BulkString(h.to_vec()),
                RedisValue::Array(vec![
                    RedisValue::Integer(e.reads as i64),
                    RedisValue::Integer(e.writes as i64),
                    RedisValue::Integer(e.fence as i64),
                    RedisValue::Integer(ttl_left(e.deadline_ms, now)),
                ]),
            )
        })
        .collect();
    if holders.is_empty() {
        // Every lease ran out; the master removes the key on its next write.
        return Ok(RedisValue::Null);
    }
    let mode = if writes { "write" } else { "read" };
    Ok(map(vec![
        ("mode", RedisValue::SimpleStringStatic(mode)),
        ("holders", RedisValue::OrderedMap(holders)),
        ("waiters", RedisValue::Integer(waiting::waiters(ctx, name))),
        ("queue", waiting::queue(ctx, name)),
        ("keep", RedisValue::Integer(bound)),
    ]))
}

impl crate::glue::commands::Family for crate::core::rwlock::RwLock {
    const COMMANDS: &'static [crate::glue::commands::spec::Command] = COMMANDS;
}
