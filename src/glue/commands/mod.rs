//! Command bodies, one file per family, each with its rows (`spec`): parse
//! (`core::args`), call the kind (`glue::kinds`) or the waiting engine,
//! reply. `all()` is every command, the kinds' state commands included;
//! `glue::table` registers them.

pub mod spec;

use std::rc::Rc;
use std::sync::atomic::AtomicU64;

use redis_module::{Context, RedisString, RedisValue};

use super::blocking;
use super::info::bump;
use super::keep;
use super::kinds::state::{self, SetState};
use super::kinds::Kind;
use super::mailbox::{self, Mail};
use super::types::with_kinds;
use super::waiting::{self, Attempt, Try, Want};
use crate::core::args::{self, Arg};
use crate::core::error::Error;
use spec::{Command, Doc, Ids, Keys, SET};

/// A command body: the arguments after the name are parsed inside.
pub type Body = fn(&Context, &[RedisString]) -> Result<RedisValue, Error>;

extern "C" fn state_handler<K: SetState>(
    ctx: *mut redis_module::raw::RedisModuleCtx,
    argv: *mut *mut redis_module::raw::RedisModuleString,
    argc: std::os::raw::c_int,
) -> std::os::raw::c_int {
    spec::handle(ctx, argv, argc, state::command::<K>, (Ids::No, c""))
}

/// A kind's state command, from its `KindInfo`.
fn state_command<K: SetState>() -> Command {
    let info = K::INFO;
    effect_row(
        info.state_command,
        state_handler::<K>,
        Doc {
            summary: info.state_summary,
            complexity: info.state_complexity,
            syntax: info.state_syntax,
            keys: Keys::One(SET),
        },
    )
}

/// The row of a state command: for the replication stream and the AOF
/// (or a slot migration's stream) only, never a client's.
const fn effect_row(name: &'static std::ffi::CStr, handler: spec::Handler, doc: Doc) -> Command {
    Command {
        name,
        handler,
        flags: c"write admin",
        keys: match doc.keys {
            Keys::None => (0, 0, 0),
            _ => (1, 1, 1),
        },
        acl: "write admin dangerous",
        internal: true,
        doc,
    }
}

/// A kind's command family (its `commands!` rows). `all` reads it for
/// every kind of `types::with_kinds!`, with its state command: a kind
/// listed there without a family does not compile, and a family is
/// registered only through the list.
pub trait Family: Kind + SetState {
    const COMMANDS: &'static [Command];
}

/// Every command padlock registers.
pub fn all() -> Vec<Command> {
    let mut out: Vec<Command> = Vec::new();
    macro_rules! families {
        ($($t:ty),*) => {
            $(
                out.extend_from_slice(<$t as Family>::COMMANDS);
                out.push(state_command::<$t>());
            )*
        };
    }
    with_kinds!(families);
    out.extend_from_slice(EFFECTS);
    out
}

/// A state command that belongs to no kind: its row, with a C handler of
/// its own around `body`.
macro_rules! effect {
    ($name:expr, $body:path, $summary:literal, $syntax:literal, $keys:expr) => {
        effect_row(
            $name,
            {
                extern "C" fn h(
                    ctx: *mut redis_module::raw::RedisModuleCtx,
                    argv: *mut *mut redis_module::raw::RedisModuleString,
                    argc: std::os::raw::c_int,
                ) -> std::os::raw::c_int {
                    spec::handle(ctx, argv, argc, $body, (Ids::No, c""))
                }
                h
            },
            Doc {
                summary: $summary,
                complexity: "O(1)",
                syntax: $syntax,
                keys: $keys,
            },
        )
    };
}

/// The state commands of no kind: the fence counter's (atomic slot
/// migration), the request-ids' and a mailbox post's (replication stream
/// and AOF only).
const EFFECTS: &[Command] = &[
    effect!(
        c"padlock.fencefloor",
        state::fence_floor,
        "State command (slot migration stream only): raises the fence counter to at least fence.",
        "fence",
        Keys::None
    ),
    effect!(
        super::requests::saved::NAME,
        super::requests::saved::command,
        "State command (replication stream and AOF only): remembers, or forgets, a request-id applied to a key and holder.",
        "key holder request-id at-ms print I|A reply [reply ...]",
        Keys::One(SET)
    ),
    effect!(
        mailbox::POST_COMMAND,
        mailbox::command,
        "State command (replication stream and AOF only): appends an outcome to a mailbox list and sets the list's expiry.",
        "mailbox-key at-ms element",
        Keys::One(spec::POST)
    ),
];

/// What a refused acquire waits for with `BLOCK`, and the mailbox it
/// names (checked: `mailbox_of`).
pub(crate) struct Wait<'a> {
    pub holder: &'a [u8],
    pub keys: &'a [RedisString],
    pub block_ms: Option<i64>,
    pub mailbox: Option<(&'a RedisString, Mail)>,
}

/// Runs an acquire's attempt and reply with its `KEEP` binding announced
/// (`keep::binding_first`): the grant's own write binds the lease and
/// carries its far deadline, with the loss mailbox (`MAILBOX`) known by
/// then. Without `KEEP` it only runs `f`.
#[inline]
pub(crate) fn keeping<'m, R>(
    (name, holder): (&RedisString, &[u8]),
    (client, ttl_ms, renew): (Option<u64>, i64, keep::Renew),
    mailbox: Option<(&'m RedisString, Mail)>,
    f: impl FnOnce(Option<(&'m RedisString, Mail)>) -> R,
) -> R {
    if client.is_none() {
        return f(mailbox);
    }
    let mail = mailbox.as_ref().map(|(_, m)| m.clone());
    keep::losses_to(mail, || {
        keep::binding_first((name.as_slice(), holder), client, ttl_ms, renew, || {
            f(mailbox)
        })
    })
}

/// The shape every acquire shares: what `attempt` got is the reply; when it
/// was refused, the reply is nil, or with `BLOCK` the client queues (the
/// restart grace refuses with `-TRYAGAIN`, and `BLOCK` waits that out too).
/// Inside MULTI, Lua or a module call `BLOCK` acts as absent. `want`
/// builds the waiting request only when the client does wait.
pub(crate) fn grant_or_wait<T>(
    ctx: &Context,
    attempt: Result<Attempt<T>, Error>,
    reply: impl FnOnce(T) -> RedisValue,
    contended: &AtomicU64,
    wait: Wait<'_>,
    want: impl FnOnce() -> Rc<dyn Want>,
) -> Result<RedisValue, Error> {
    // Whether a refusal waits is asked only once refused (see `Try::will_wait`).
    let block = || wait.block_ms.filter(|_| blocking::can_block(ctx));
    let (seen, block) = match attempt {
        // A `KEEP` grant's binding reports its loss to the mailbox: the
        // caller runs this inside that scope (`keeping`).
        Ok(Attempt::Got(got)) => return Ok(reply(got)),
        Ok(Attempt::Refused(seen)) => (seen, block()),
        Err(Error::TryAgain) => match block() {
            Some(timeout) => (None, Some(timeout)),
            None => return Err(Error::TryAgain),
        },
        Err(e) => return Err(e),
    };
    bump(contended);
    match block {
        None => Ok(RedisValue::Null),
        Some(timeout) => {
            let mailbox = wait.mailbox.map(|(k, _)| k);
            waiting::wait(
                ctx,
                wait.holder,
                wait.keys,
                (want(), mailbox),
                timeout,
                seen,
            )
        }
    }
}

/// A command's `MAILBOX mailbox-key`, checked before anything is tried (a
/// list or absent, and an `ID` to start its elements with), with where
/// its posts go.
pub(crate) fn mailbox_of<'a>(
    ctx: &Context,
    key: &RedisString,
    mailbox: Option<&'a RedisString>,
) -> Result<Option<(&'a RedisString, Mail)>, Error> {
    let Some(m) = mailbox else {
        return Ok(None);
    };
    let tag = super::requests::current();
    mailbox::check(ctx, key.as_slice(), m, tag.as_deref().map(|t| &*t.id))?;
    Ok(tag.map(|t| {
        let mail = Mail {
            db: blocking::selected_db(ctx),
            key: m.as_slice().into(),
            rid: (*t.id).into(),
        };
        (m, mail)
    }))
}

/// A command's acquire, tried now.
pub(crate) fn try_now(block_ms: Option<i64>) -> Try {
    Try {
        now: crate::glue::server::now_ms(),
        block: block_ms.is_some(),
    }
}

/// Declares the keys of `numkeys key [key ...] <after more>` commands to
/// cluster routing, ACL and `COMMAND GETKEYS`. Returns true when this call
/// was only that. A `numkeys` the arguments cannot hold declares no key, so
/// `COMMAND GETKEYS` answers an error (and the command itself its own),
/// never holder or ttl as keys.
pub(crate) fn declare_keys(ctx: &Context, args: &[RedisString], after: usize) -> bool {
    if !ctx.is_keys_position_request() {
        return false;
    }
    let n = args
        .get(1)
        .and_then(|a| args::parse_int(a.bytes()))
        .filter(|n| (1..=args::MAX_KEYS).contains(n))
        .map_or(0, |n| n as usize);
    if 2 + n + after <= args.len() {
        for pos in 2..2 + n {
            ctx.key_at_pos(pos as i32);
        }
        // `MAILBOX mailbox-key` among the options is a key too.
        let options = 2 + n + after;
        let mut i = options;
        while i + 1 < args.len() {
            let word = args[i].as_slice();
            if word.eq_ignore_ascii_case(b"MAILBOX") {
                ctx.key_at_pos((i + 1) as i32);
                break;
            }
            i += if word.eq_ignore_ascii_case(b"KEEP") {
                1
            } else {
                2
            };
        }
    }
    true
}
