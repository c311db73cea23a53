//! A request joins its queues: the bounds, the deadlock check, the
//! blocked client, its edges and the watch on its keys; and a resend of a
//! request still queued takes its place.

use std::borrow::Cow;
use std::rc::Rc;

use redis_module::{Context, RedisString, RedisValue};

use super::super::blocking::{self, Reply};
use super::super::config;
use super::super::mailbox::{self, Mail};
use super::super::requests::{self, Tag};
use super::super::server::now_ms;
use super::super::timer;
use super::state::{self, KeyId, Party, Seen, Want};
use super::{clients, deadlock, handoff};
use crate::core::error::Error;
use crate::core::waiters::Entry;

/// The reply of a request queued with `MAILBOX`.
pub const WAITING: RedisValue = RedisValue::SimpleStringStatic("WAITING");

/// Queues the request on `names` (all in the selected database), behind
/// everyone already queued there, unless that would deadlock: its client
/// blocks, or with `mailbox` it is answered `WAITING` and its outcome is
/// posted there. `seen`: what the refused attempt read of its one key, so
/// that it is not read again.
pub fn wait(
    ctx: &Context,
    holder: &[u8],
    names: &[RedisString],
    (want, mailbox): (Rc<dyn Want>, Option<&RedisString>),
    timeout_ms: i64,
    seen: Option<Seen>,
) -> Result<RedisValue, Error> {
    let now = now_ms();
    let db = blocking::selected_db(ctx);
    let keys: Vec<KeyId> = names.iter().map(|n| KeyId::of(ctx, n)).collect();
    check_bounds(&keys)?;
    let mut seen = seen.filter(|_| keys.len() == 1);
    // A key of a multi-key request that the holder alone already holds is
    // no wait (semaphore permits it holds still are: more may never come).
    // Borrowed while every key so far is waited for (always, for one key).
    let mut waits: Cow<[KeyId]> = Cow::Borrowed(&keys);
    for (i, (key, name)) in keys.iter().zip(names).enumerate() {
        let only_mine = match &seen {
            Some(s) => s.held.only(holder),
            None => deadlock::held_now(ctx, name, now)?.only(holder),
        };
        match (&mut waits, only_mine) {
            (Cow::Borrowed(_), true) => waits = Cow::Owned(keys[..i].to_vec()),
            (Cow::Owned(w), false) => w.push(key.clone()),
            _ => {}
        }
    }
    if !waits.is_empty() {
        // Handed over, not copied: nothing after the check reads it.
        let known = seen.as_mut().map(|s| {
            s.held_for
                .take()
                .unwrap_or_else(|| std::mem::take(&mut s.held))
        });
        deadlock::check(
            ctx,
            holder,
            &waits,
            deadlock::Request::New(&*want),
            now,
            known,
        )?;
    }
    drop(waits);
    let want_first = want.jumps_queue();
    let request = requests::current();
    let (to, reply) = match (mailbox, &request) {
        (Some(m), Some(tag)) => (party(ctx, db, m, tag), WAITING),
        _ => (Party::Blocked(clients::block(ctx)), RedisValue::NoReply),
    };
    let timeout_at = (timeout_ms > 0).then(|| now + timeout_ms);
    // The keys move into the queue; one key's name is kept for the watch
    // below (a shared name: no copy), several keys are copied.
    let (single, several) = match keys.as_slice() {
        [k] => (Some(k.clone()), Vec::new()),
        _ => (None, keys.clone()),
    };
    state::with(|s| {
        let handle = match &to {
            Party::Blocked(h) => h.id(),
            Party::Mailbox { .. } => s.mailbox_handle(),
        };
        let entry = Entry {
            handle,
            timeout_at,
            payload: state::Waiter {
                to,
                holder: holder.to_vec(),
                want,
                db,
                since: now,
                queued: std::time::Instant::now(),
                request,
            },
        };
        let id = s.push(keys, entry, want_first);
        if let Some((queued, _)) = s.waiters.get(id) {
            for k in queued {
                s.graph.add_blocked(holder, k.clone(), id, timeout_at);
            }
        }
    });
    if let Some(t) = timeout_at {
        timer::arm(t);
    }
    match (&seen, single) {
        (Some(s), Some(k)) => handoff::refresh_at(&k, s.frees_at),
        (_, single) => {
            for k in single.iter().chain(&several) {
                handoff::refresh(ctx, k);
            }
        }
    }
    Ok(reply)
}

/// A mailbox request belongs to the connection that sent it.
fn party(ctx: &Context, db: i32, mailbox: &RedisString, tag: &Tag) -> Party {
    // SAFETY: live context.
    let client = unsafe { rm!(RedisModule_GetClientId)(ctx.ctx) };
    Party::Mailbox {
        client,
        mail: Mail {
            db,
            key: mailbox.as_slice().into(),
            rid: (*tag.id).into(),
        },
    }
}

/// A resend of a request that still waits (same key, holder and id) takes
/// its place in the queue, with the resend's timeout, and moves to the
/// resend's connection: a blocked older sending is answered nil; with
/// `MAILBOX` the resend is answered `WAITING` (the outcome goes to the
/// resend's mailbox). None: nothing of it waits (or the resend cannot wait
/// here), and the command runs as usual.
pub fn take_place(
    ctx: &Context,
    tag: &Tag,
    (block, mailbox): (Option<&RedisString>, Option<&RedisString>),
) -> Result<Option<RedisValue>, Error> {
    let timeout = block
        .and_then(|b| crate::core::args::parse_int(b.as_slice()))
        .filter(|t| (0..=crate::glue::config::limits().max_ttl_ms).contains(t));
    let Some(timeout) = timeout else {
        return Ok(None);
    };
    // Nothing queued under this id (nearly always) is known before the
    // context's flags are read.
    if state::with(|s| s.queued(tag)).is_none() || !blocking::can_block(ctx) {
        return Ok(None);
    }
    let (to, reply) = match mailbox {
        Some(m) => {
            mailbox::check(ctx, tag.at.key(), m, Some(&tag.id))?;
            (party(ctx, tag.at.db, m, tag), WAITING)
        }
        None => (Party::Blocked(clients::block(ctx)), RedisValue::NoReply),
    };
    let timeout_at = (timeout > 0).then(|| now_ms() + timeout);
    let swapped = state::with(|s| {
        let Some(id) = s.queued(tag) else {
            return Err(to);
        };
        let handle = match &to {
            Party::Blocked(h) => h.id(),
            Party::Mailbox { .. } => s.mailbox_handle(),
        };
        s.rehome(id, to, handle, timeout_at)
    });
    match swapped {
        Ok(Party::Blocked(old)) => clients::wake(old, Reply::Nil, None),
        // The same request, heard of where it is now.
        Ok(Party::Mailbox { .. }) => {}
        // Nothing ran between the look and the swap; should it ever not be
        // there, the resend is told to send again rather than left blocked.
        Err(new) => {
            let why = Error::Invalid("request stopped waiting, send it again");
            match new {
                Party::Blocked(h) => clients::wake(h, Reply::Error(why.message()), None),
                Party::Mailbox { .. } => return Err(why),
            }
        }
    }
    if let Some(t) = timeout_at {
        timer::arm(t);
    }
    Ok(Some(reply))
}

/// Refuses a wait past `max-waiters-per-key` or `max-waiters`.
fn check_bounds(keys: &[KeyId]) -> Result<(), Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let per_key = config::MAX_WAITERS_PER_KEY.load(Relaxed);
    let total = config::MAX_WAITERS.load(Relaxed);
    state::with(|s| {
        if s.waiters.waiting() as i64 >= total {
            return Err(Error::TooManyWaiters {
                key: None,
                limit: total,
            });
        }
        match keys.iter().find(|k| s.waiters.len(k) as i64 >= per_key) {
            Some(k) => Err(Error::TooManyWaiters {
                key: Some(k.name.to_vec()),
                limit: per_key,
            }),
            None => Ok(()),
        }
    })
}
