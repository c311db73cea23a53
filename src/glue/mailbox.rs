//! Mailboxes (`MAILBOX mailbox-key`): lists a queued request's outcome, or
//! a bound hold's loss, is appended to, so that a caller waits with
//! `BLPOP` on a connection it shares with every other wait instead of
//! holding one per wait. A post is an `RPUSH` in every way a client can
//! see: it wakes `BLPOP`, fires the `rpush` event, touches `WATCH`, and is
//! replicated in the same atomic step as the grant it reports, as one
//! effect with the mailbox's absolute expiry (`padlock.post`).
//!
//! Posts happen where padlock may write (a command, or its timer while a
//! master that is not paused or loading); one that comes where it may not
//! (a callback that removed a bound key, a paused server) waits in the
//! outbox for the next timer pass that may.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::{Context, KeyType, NotifyEvent, RedisString, RedisValue};

use super::blocking::{self, Reply};
use super::config;
use super::key::Key;
use super::server::now_ms;
use crate::core::args::parse_int;
use crate::core::cluster;
use crate::core::error::Error;

/// Where one request's outcomes go: the mailbox (in the request's
/// database) and the request-id that starts each element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub db: i32,
    pub key: Rc<[u8]>,
    pub rid: Rc<[u8]>,
}

/// Outcomes appended, and those dropped because the mailbox had become
/// another type (for `INFO padlock`).
pub static POSTED: AtomicU64 = AtomicU64::new(0);
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Posts that came where padlock may not write.
    static OUTBOX: RefCell<Vec<(Mail, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

/// A mailbox named by a command must be a list or absent, in the slot of
/// the request's `key` in a cluster, and the request must carry an id
/// without a space (each element is `<id> <reply>`). Redis checks the
/// slot itself from the key specs where its cluster reads them (7.2 and
/// later); 7.0 reads only the first key, so padlock checks too.
pub fn check(
    ctx: &Context,
    key: &[u8],
    mailbox: &RedisString,
    rid: Option<&[u8]>,
) -> Result<(), Error> {
    if super::server::cluster_enabled(ctx)
        && cluster::key_slot(key) != cluster::key_slot(mailbox.as_slice())
    {
        return Err(Error::CrossSlot);
    }
    super::leaving::check(key)?;
    match rid {
        None => return Err(Error::Invalid("MAILBOX needs ID request-id")),
        Some(r) if r.contains(&b' ') => {
            return Err(Error::Invalid(
                "a request-id used with MAILBOX may not contain a space",
            ))
        }
        Some(_) => {}
    }
    match ctx.open_key(mailbox).key_type() {
        KeyType::Empty | KeyType::List => Ok(()),
        _ => Err(Error::WrongType),
    }
}

/// The element for `reply`: the reply a blocked request would have got,
/// as text (fences joined by `,`, `nil`, or `-` and the error line).
pub fn element(rid: &[u8], reply: &Reply) -> Vec<u8> {
    let mut out = Vec::with_capacity(rid.len() + 24);
    out.extend_from_slice(rid);
    out.push(b' ');
    let mut digits = itoa::Buffer::new();
    match reply {
        Reply::Nil => out.extend_from_slice(b"nil"),
        Reply::Int(v) => out.extend_from_slice(digits.format(*v).as_bytes()),
        Reply::Ints(vs) => {
            for (i, v) in vs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(digits.format(*v).as_bytes());
            }
        }
        Reply::Error(e) => {
            out.push(b'-');
            out.extend_from_slice(e.as_bytes());
        }
    }
    out
}

/// Appends `reply` for `mail` now if padlock may write here, else at the
/// next timer pass that may.
pub fn post(ctx: &Context, mail: &Mail, reply: &Reply) {
    let e = element(&mail.rid, reply);
    if blocking::may_write(ctx) {
        write(ctx, mail, &e);
    } else {
        later(mail.clone(), e);
    }
}

/// Queues a post from where nothing may be written (a type's callback).
pub fn later(mail: Mail, element: Vec<u8>) {
    OUTBOX.with(|o| o.borrow_mut().push((mail, element)));
    super::timer::arm(now_ms());
}

/// Whether posts wait for a timer pass that may write.
pub fn any_later() -> bool {
    OUTBOX.with(|o| !o.borrow().is_empty())
}

/// Posts what waited, from a timer pass that may write.
pub fn flush(ctx: &Context) {
    if !any_later() {
        return;
    }
    let posts = OUTBOX.with(|o| std::mem::take(&mut *o.borrow_mut()));
    for (mail, e) in posts {
        write(ctx, &mail, &e);
    }
}

/// This server became a replica: it posts nothing any more (its master's
/// view of those requests is its own).
pub fn forget_all() {
    OUTBOX.with(|o| o.borrow_mut().clear());
}

fn write(ctx: &Context, mail: &Mail, element: &[u8]) {
    blocking::in_db(ctx, mail.db, || {
        let name = RedisString::create_from_slice(ctx.ctx, &mail.key);
        let value = RedisString::create_from_slice(ctx.ctx, element);
        let ttl = config::MAILBOX_TTL_MS.load(Ordering::Relaxed).max(1);
        let at = now_ms().saturating_add(ttl);
        if !append(ctx, &name, &value, at) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut digits = itoa::Buffer::new();
        let at = digits.format(at);
        // One effect for the element and the expiry: `RPUSH` and
        // `PEXPIREAT` were two, and `RM_Replicate` looks each up by name
        // (~2,400 instructions a call, a served waiter paid four). The
        // strings are Redis' own (`s`: a reference, not a copy).
        // SAFETY: format "sbs" names two live strings and a buffer that
        // outlives the call.
        unsafe {
            rm!(RedisModule_Replicate)(
                ctx.ctx,
                POST_COMMAND.as_ptr(),
                c"sbs".as_ptr(),
                name.inner,
                at.as_ptr() as *const std::os::raw::c_char,
                at.len(),
                value.inner,
            );
        }
        POSTED.fetch_add(1, Ordering::Relaxed);
    });
}

/// The effect a post replicates as: `padlock.post mailbox-key at-ms
/// element`.
pub const POST_COMMAND: &std::ffi::CStr = c"padlock.post";

/// Appends `element` to the list `name` and sets its expiry to `at` (unix
/// ms): a post, made here or arriving from the master or the AOF. What a
/// client sees is an `RPUSH`'s: `BLPOP` woken, the `rpush` event, `WATCH`
/// touched. False when the key holds another type (nothing written).
fn append(ctx: &Context, name: &RedisString, element: &RedisString, at: i64) -> bool {
    let mut key = Key::write(ctx, name);
    if !key.list_or_empty() || !key.push_tail(element) {
        return false;
    }
    key.set_expire_at(at);
    // Closed (and `WATCH` told) before the event, as `RPUSH` does.
    drop(key);
    ctx.notify_keyspace_event(NotifyEvent::LIST, "rpush", name);
    true
}

/// `padlock.post mailbox-key at-ms element`: a post from the master or
/// the AOF, applied as the master did and passed on to this server's own
/// AOF. A mailbox that became another type here drops it, as the master
/// would have.
pub fn command(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    super::server::from_replication(ctx, args)?;
    let [_, name, at, element] = args else {
        return Err(Error::Arity);
    };
    let at = parse_int(at.as_slice())
        .filter(|at| *at >= 0)
        .ok_or(Error::Range {
            name: "at-ms",
            min: 0,
            max: i64::MAX,
        })?;
    if !append(ctx, name, element, at) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: live context.
    unsafe {
        rm!(RedisModule_ReplicateVerbatim)(ctx.ctx);
    }
    Ok(RedisValue::SimpleStringStatic("OK"))
}
