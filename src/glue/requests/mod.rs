//! `ID request-id` on the changing commands (docs/commands.md's "Retries"): a
//! resend with the same key(s), holder and id answers the first reply and
//! changes nothing. The rules of what is remembered, and for how long, are
//! `core::ids`; here a command is looked up before its body runs, its
//! reply remembered (and replicated) after, a queued wait's id goes with
//! it until it is granted, and the memory is saved with the RDB and the
//! AOF (`saved`) and pruned by its own timer (`prune`).

mod memory;
pub mod piggy;
mod prune;
pub mod rdb;
pub mod rider;
mod rule;
pub mod saved;

pub use memory::{bounds, with};

use std::rc::Rc;
use std::sync::atomic::AtomicU64;

use redis_module::{Context, RedisString, RedisValue};

use super::blocking::{self, Reply};
use super::info::bump;
use super::server::now_ms;
use crate::core::args::{parse_int, Arg};
use crate::core::error::Error;
use crate::core::ids::{self, Address, Answer, Found, Id, Names, Remembered, Spots};

/// Where a command's positional arguments end: `After(n)` for `key holder
/// ...` with n of them, `AfterKeys(n)` for `numkeys key [key ...] holder
/// ...` with n after the keys. `No`: the command takes no `ID`.
#[derive(Clone, Copy, Debug)]
pub enum Ids {
    No,
    After(usize),
    AfterKeys(usize),
}

/// Replays answered from memory.
pub static REPLAYED: AtomicU64 = AtomicU64::new(0);

/// A request's id where it applies: what a queued wait carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tag {
    pub at: Address,
    pub id: Id,
    pub print: u64,
}

impl Tag {
    /// What is remembered of this request once it applied with `answer`
    /// at `at_ms`, and where.
    fn applied(self, answer: Answer, at_ms: i64) -> (Address, Remembered) {
        let r = Remembered {
            id: self.id,
            print: self.print,
            answer,
            at_ms,
        };
        (self.at, r)
    }
}

/// The index of the first option of a command's arguments (name at 0).
fn options_start<A: std::ops::Deref<Target = [u8]>>(ids: Ids, args: &[A]) -> Option<usize> {
    match ids {
        Ids::No => None,
        Ids::After(n) => Some(1 + n),
        Ids::AfterKeys(n) => {
            let keys = parse_int(args.get(1)?).filter(|&k| k >= 1)?;
            Some(2 + usize::try_from(keys).ok()? + n)
        }
    }
}

/// Where `ID` sits in a command's arguments, if it was given.
pub fn spots<A: std::ops::Deref<Target = [u8]>>(
    ids: Ids,
    args: &[A],
) -> Result<Option<Spots>, Error> {
    let Some(start) = options_start(ids, args) else {
        return Ok(None);
    };
    if start > args.len() {
        return Ok(None);
    }
    let s = ids::spots(args, start)?;
    Ok(s.id.map(|_| s))
}

/// The group a command's request belongs to: its (first) key and holder.
fn names(ids: Ids, args: &[RedisString]) -> Option<(&[u8], &[u8])> {
    let (key, holder) = match ids {
        Ids::No => return None,
        Ids::After(_) => (args.get(1)?, args.get(2)?),
        Ids::AfterKeys(_) => {
            let n = parse_int(args.get(1)?.bytes())? as usize;
            (args.get(2)?, args.get(2 + n)?)
        }
    };
    Some((key.as_slice(), holder.as_slice()))
}

/// The request's arguments but its id (and how it waits: `BLOCK`'s value,
/// a resend may wait less; `MAILBOX mailbox-key`, a resend may wait on a
/// connection or another mailbox), hashed; the name in lower case.
fn print_of(args: &[RedisString], name: &[u8], s: &Spots) -> u64 {
    let before = |at: Option<usize>| at.and_then(|i| i.checked_sub(1));
    let left_out = [s.id, before(s.id), s.block, s.mailbox, before(s.mailbox)];
    // As a bit per argument where they fit (every single-key command).
    let mask = left_out.iter().fold(0u64, |m, at| match at {
        Some(i) if *i < 64 => m | 1 << i,
        _ => m,
    });
    let mut p = ids::Print::default();
    p.add(name);
    for (i, a) in args.iter().enumerate().skip(1) {
        let skip = match i {
            0..64 => mask >> i & 1 == 1,
            _ => left_out.contains(&Some(i)),
        };
        if !skip {
            p.add(a.bytes());
        }
    }
    p.finish()
}

fn to_answer(v: &RedisValue) -> Option<Answer> {
    match v {
        RedisValue::Integer(i) => Some(Answer::Int(*i)),
        RedisValue::Array(vs) => vs
            .iter()
            .map(|x| match x {
                RedisValue::Integer(i) => Some(*i),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|vs| Answer::Ints(vs.into())),
        _ => None,
    }
}

fn from_answer(a: &Answer) -> RedisValue {
    match a {
        Answer::Int(i) => RedisValue::Integer(*i),
        Answer::Ints(vs) => RedisValue::Array(vs.iter().map(|v| RedisValue::Integer(*v)).collect()),
    }
}

fn reply_answer(r: &Reply) -> Option<Answer> {
    match r {
        Reply::Int(i) => Some(Answer::Int(*i)),
        Reply::Ints(vs) => Some(Answer::Ints(vs[..].into())),
        Reply::Nil | Reply::Error(_) => None,
    }
}

/// How a resend takes the place of its own request still queued (the
/// waiting engine's `take_place`).
/// It gets the resend's `BLOCK` and `MAILBOX` values.
pub type TakePlace = fn(
    &Context,
    &Tag,
    (Option<&RedisString>, Option<&RedisString>),
) -> Result<Option<RedisValue>, Error>;

/// Runs a command that carries `ID`: `full` are its arguments as sent,
/// `args` without the id, which is all `body` sees; `name` is the
/// command's as registered (lower case: what the print hashes, as a
/// client's spelling of it may differ).
pub fn run(
    ctx: &Context,
    (ids, name): (Ids, &'static [u8]),
    (full, args): (&[RedisString], &[RedisString]),
    s: Spots,
    take_place: TakePlace,
    body: impl FnOnce(&Context, &[RedisString]) -> Result<RedisValue, Error>,
) -> Result<RedisValue, Error> {
    let (Some(names), Some(id)) = (names(ids, full), s.id.and_then(|i| full.get(i))) else {
        return body(ctx, args);
    };
    let (id, print) = (id.as_slice(), print_of(full, name, &s));
    let db = blocking::selected_db(ctx);
    // A known group lends its shared names: only a new one copies them.
    let (found, shared) = with(|m| {
        let (found, shared) = m.lookup(db, names, id, print);
        let found = match found {
            Found::New => Ok(None),
            Found::Replay(a) => Ok(Some(from_answer(a))),
            Found::Other => Err(Error::RequestIdReused(id.to_vec())),
        };
        (found, shared)
    });
    if let Some(v) = found? {
        bump(&REPLAYED);
        return Ok(v);
    }
    let names = shared.unwrap_or_else(|| Names::new(names.0, names.1));
    let tag = Tag {
        at: Address { db, names },
        id: id.into(),
        print,
    };
    let waits = (
        s.block.and_then(|i| full.get(i)),
        s.mailbox.and_then(|i| full.get(i)),
    );
    if let Some(v) = take_place(ctx, &tag, waits)? {
        return Ok(v);
    }
    let at_ms = now_ms();
    let rule = matches!(ids, Ids::After(_))
        .then(|| piggy::Rule::of(name))
        .flatten();
    let (result, rode) = {
        let _boarded = rider::board_as(&tag, rule, piggy::verbatim(name), at_ms);
        let result = body(ctx, args);
        (result, rider::alight())
    };
    if let Ok(v) = &result {
        if let Some(answer) = to_answer(v) {
            // Replicated already when it rode on the effect, and right.
            let sent = rode.as_ref() == Some(&answer);
            remember_at(ctx, tag, answer, at_ms, !sent);
        }
    }
    result
}

/// The id of the command running now (`waiting::wait` queues it with the
/// waiter).
pub fn current() -> Option<Rc<Tag>> {
    rider::running()
}

/// A queued request with an id was granted: remembered as applied, so a
/// resend after its client gave up learns that it holds. Runs with the
/// waiter's database selected.
/// `rode`: what the grant's own effect carried (see `riding`); sent apart
/// otherwise.
pub fn granted(ctx: &Context, tag: Rc<Tag>, reply: &Reply, (at_ms, rode): (i64, Option<Answer>)) {
    if let Some(answer) = reply_answer(reply) {
        let tag = Rc::try_unwrap(tag).unwrap_or_else(|t| (*t).clone());
        let sent = rode.as_ref() == Some(&answer);
        remember_at(ctx, tag, answer, at_ms, !sent);
    }
}

/// Runs a queued request's grant (`f`) with its id aboard, so that it
/// rides on the grant's own effect when `rule` says which field its reply
/// is: one replicated command instead of two. Answers what rode, for
/// `granted`.
pub fn riding<R>(
    tag: Option<&Rc<Tag>>,
    rule: Option<piggy::Rule>,
    at_ms: i64,
    f: impl FnOnce() -> R,
) -> (R, Option<Answer>) {
    let (Some(tag), Some(rule)) = (tag, rule) else {
        return (f(), None);
    };
    let _boarded = rider::board(tag, Some(rule), at_ms);
    let r = f();
    let rode = rider::alight();
    (r, rode)
}

/// Remembers a request applied at `at_ms` (now: in this command or
/// pass); `send`: replicate it too (not when it rode on the request's own
/// effect, or came from the master).
fn remember_at(ctx: &Context, tag: Tag, answer: Answer, at_ms: i64, send: bool) {
    let (at, r) = tag.applied(answer, at_ms);
    if send {
        saved::replicate(ctx, &at, &r);
    }
    store(ctx, at, r, at_ms);
}

/// Into the memory, within its bounds: every way an id arrives (a
/// request, an effect, a tail on one) comes through here. `now`: the
/// clock read once by the caller.
fn store(ctx: &Context, at: Address, r: Remembered, now: i64) {
    with(|m| m.remember(at, r, bounds()));
    prune::after_remember(ctx, now);
}

/// An effect from the master or the AOF carried a request-id (`piggy`):
/// remembered as the master remembered it.
pub fn rode_in(ctx: &Context, tag: Tag, answer: Answer, at_ms: i64) {
    let (at, r) = tag.applied(answer, at_ms);
    // The master's clock is not this server's.
    store(ctx, at, r, now_ms());
}

/// A grant taken back (its reply never reached the client): the request
/// did not apply after all.
pub fn taken_back(ctx: &Context, tag: &Tag) {
    with(|m| m.forget_id(&tag.at, &tag.id));
    saved::replicate_forget(ctx, tag);
}

/// `FLUSHDB` (`Some(db)`) or `FLUSHALL`: what applied to the flushed keys
/// is gone with them.
pub fn flushed(db: Option<i32>) {
    memory::try_with(|m| m.forget_db(db));
}

pub fn init(ctx: &Context) {
    prune::init(ctx);
    super::timer::on_gone(key_gone);
}

/// A key went by any hand (its lease ran out, `DEL`, eviction): its ids
/// count against `max-remembered-ids` like those of a key a release
/// freed (kept the same `id-memory-ms`, the oldest forgotten first once
/// past the bound, one found held again kept).
fn key_gone(db: i32, name: &[u8], on_purpose: bool) {
    // padlock's own delete comes from a request that remembers what it
    // freed (nothing to look up on the release path).
    if on_purpose {
        return;
    }
    memory::try_with(|m| {
        if !m.is_empty() {
            m.key_gone(db, name);
        }
    });
}

/// For `INFO padlock`: ids remembered for keys no longer held.
pub fn remembered_freed() -> i64 {
    memory::try_with(|m| m.freed_len() as i64).unwrap_or(0)
}

/// For `INFO padlock`: ids remembered now.
pub fn remembered() -> i64 {
    memory::try_with(|m| m.len() as i64).unwrap_or(0)
}
