//! What a command is: its C handler (one per body, made by `commands!`),
//! its flags, key positions, ACL categories and `COMMAND DOCS` text, in one
//! row. Each family file lists its rows; `glue::table` registers them all,
//! so a command cannot exist without its categories or its docs.

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue};

use super::Body;
use crate::glue::guard;
use crate::glue::replicate;
use crate::glue::requests;
pub use crate::glue::requests::Ids;
use crate::glue::server;
use crate::glue::waiting;

pub type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Key spec flags (`REDISMODULE_CMD_KEY_*`).
pub const RO: u64 = 1;
pub const RW: u64 = 2;
pub const ACCESS: u64 = 16;
pub const UPDATE: u64 = 32;

// Redis takes one of INSERT, UPDATE and DELETE; a grant may create the
// key and a release delete it, but both read and change a value that may
// be there, which is UPDATE.
pub const GRANT: u64 = RW | ACCESS | UPDATE;
pub const GIVE_BACK: u64 = RW | ACCESS | UPDATE;
pub const RENEW: u64 = RW | ACCESS | UPDATE;
pub const LOOK: u64 = RO | ACCESS;
pub const SET: u64 = RW | UPDATE;
/// A mailbox: outcomes are appended to it (`RPUSH`'s flags).
pub const POST: u64 = RW | INSERT;
pub const INSERT: u64 = 64;

/// How the keys are found: one at index 1, or `numkeys key [key ...]`;
/// `Mailbox` adds a `MAILBOX mailbox-key` found from the given index on
/// (after the positional arguments) to either.
#[derive(Clone, Copy)]
pub enum Keys {
    None,
    One(u64),
    Counted(u64),
    Mailbox(&'static Keys, c_int),
}

pub const ONE_GRANT: Keys = Keys::One(GRANT);
pub const ONE_RENEW: Keys = Keys::One(RENEW);
pub const COUNTED_GRANT: Keys = Keys::Counted(GRANT);

/// `COMMAND DOCS`: the syntax line is docs/commands.md's, read by `core::syntax`.
#[derive(Clone, Copy)]
pub struct Doc {
    pub summary: &'static str,
    pub complexity: &'static str,
    pub syntax: &'static str,
    pub keys: Keys,
}

#[derive(Clone, Copy)]
pub struct Command {
    pub name: &'static CStr,
    pub handler: Handler,
    /// Redis command flags.
    pub flags: &'static CStr,
    /// Legacy key positions: first, last, step (0, 0, 0 with `getkeys-api`).
    pub keys: (c_int, c_int, c_int),
    /// ACL categories where the server supports them; `admin` commands do
    /// not join `@padlock`.
    pub acl: &'static str,
    /// Offered as `internal` where the server knows the flag (Redis 8.0+).
    pub internal: bool,
    pub doc: Doc,
}

/// Runs a body so that a bug can only ever turn into an error reply, never
/// a crashed server; then serves the keys its writes made ready.
pub fn handle(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    body: Body,
    (ids, name): (Ids, &'static CStr),
) -> c_int {
    let context = Context::new(ctx);
    let failed = Err(RedisError::Str(
        "ERR padlock internal error, see the server log",
    ));
    let response = guard::call(failed, || {
        let result = with_args(argv, argc, |args| match requests::spots(ids, args) {
            Ok(None) => body(&context, args),
            // Cluster routing asking for the keys (`getkeys-api`): no
            // client, no database, only the key positions.
            _ if context.is_keys_position_request() => body(&context, args),
            Ok(Some(s)) => without_id(args, &s, |rest| {
                requests::run(
                    &context,
                    (ids, name.to_bytes()),
                    (args, rest),
                    s,
                    waiting::take_place,
                    body,
                )
            }),
            Err(e) => Err(e),
        });
        // The one place a command's writes reach the waiting engine.
        waiting::serve_ready(&context);
        server::reply(result)
    });
    send(&context, response) as c_int
}

/// Replies; the status replies padlock sends most (`WAITING` for every
/// queued `MAILBOX` request) go out from static C strings, where the
/// crate would allocate one per reply.
fn send(context: &Context, response: RedisResult) -> raw::Status {
    let status = match &response {
        Ok(RedisValue::SimpleStringStatic("WAITING")) => c"WAITING",
        Ok(RedisValue::SimpleStringStatic("OK")) => c"OK",
        _ => return context.reply(response),
    };
    // SAFETY: live context and a static NUL-terminated string.
    unsafe { rm!(RedisModule_ReplyWithSimpleString)(context.ctx, status.as_ptr()) };
    raw::Status::Ok
}

/// Arguments most commands fit in without a heap allocation: a client's
/// blocking acquire (`LOCK.ACQUIRE k h ttl BLOCK t MAILBOX box KEEP ID rid`)
/// has 11, a semaphore's with `PERMITS` 14.
const INLINE_ARGS: usize = 16;

const NO_ARG: ManuallyDrop<RedisString> = ManuallyDrop::new(RedisString::from_redis_module_string(
    std::ptr::null_mut(),
    std::ptr::null_mut(),
));

/// Runs `f` on the command's arguments as `RedisString`s that borrow
/// Redis' own argv. (`redis_module::decode_args` retains every argument,
/// collects them into a new Vec and frees them again, on every call.)
/// Redis keeps argv alive until the command returns, and a body can only
/// borrow or copy the strings.
fn with_args<R>(
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    f: impl FnOnce(&[RedisString]) -> R,
) -> R {
    let strings: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
        // SAFETY: Redis passes argc valid strings in argv.
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    replicate::during_command(strings.as_ptr(), strings.len(), || {
        borrowed(strings.iter().copied(), strings.len(), f)
    })
}

/// Runs `f` on `n` of Redis' strings as borrowing `RedisString`s, on the
/// stack when they fit (every command comes through here, most with no
/// more than `INLINE_ARGS`).
fn borrowed<R>(
    strings: impl Iterator<Item = *mut raw::RedisModuleString>,
    n: usize,
    f: impl FnOnce(&[RedisString]) -> R,
) -> R {
    let borrow = |s| {
        ManuallyDrop::new(RedisString::from_redis_module_string(
            std::ptr::null_mut(),
            s,
        ))
    };
    let mut inline = [NO_ARG; INLINE_ARGS];
    let heap: Vec<ManuallyDrop<RedisString>>;
    let args: &[ManuallyDrop<RedisString>] = if n <= INLINE_ARGS {
        let mut len = 0;
        for (slot, s) in inline.iter_mut().zip(strings) {
            *slot = borrow(s);
            len += 1;
        }
        &inline[..len]
    } else {
        heap = strings.map(borrow).collect();
        &heap
    };
    // SAFETY: ManuallyDrop<T> has T's layout (repr(transparent)); the
    // strings are never dropped, so none is freed that padlock does not own.
    let args = unsafe { &*(args as *const [ManuallyDrop<RedisString>] as *const [RedisString]) };
    f(args)
}

/// A row's `ids = ...`, or `Ids::No` without one.
pub const fn last_ids(all: &[Ids]) -> Ids {
    all[all.len() - 1]
}

/// Runs `f` on the arguments without `ID request-id` (the body parses the
/// rest as it always does).
fn without_id<R>(
    args: &[RedisString],
    s: &crate::core::ids::Spots,
    f: impl FnOnce(&[RedisString]) -> R,
) -> R {
    let Some(v) = s.id else {
        return f(args);
    };
    // Every client library sends the pair last: the rest is a prefix.
    if v + 1 == args.len() {
        return f(&args[..v - 1]);
    }
    let kept = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != v && *i + 1 != v)
        .map(|(_, a)| a.inner);
    borrowed(kept, args.len().saturating_sub(2), f)
}

/// A family's rows: `name => body, flags, keys, acl, summary, complexity,
/// syntax, key spec;`, each with its own C handler.
macro_rules! commands {
    ($($name:literal => $body:path, $flags:literal, $keys:expr, $acl:literal,
       $summary:literal, $complexity:literal, $syntax:literal, $spec:expr
       $(, ids = $ids:expr)?;)*) => {
        pub const COMMANDS: &[$crate::glue::commands::spec::Command] = &[$(
            $crate::glue::commands::spec::Command {
                name: $name,
                handler: {
                    extern "C" fn h(
                        ctx: *mut redis_module::raw::RedisModuleCtx,
                        argv: *mut *mut redis_module::raw::RedisModuleString,
                        argc: std::os::raw::c_int,
                    ) -> std::os::raw::c_int {
                        $crate::glue::commands::spec::handle(
                            ctx, argv, argc, $body,
                            ($crate::glue::commands::spec::last_ids(&[
                                $crate::glue::requests::Ids::No $(, $ids)?
                            ]), $name),
                        )
                    }
                    h
                },
                flags: $flags,
                keys: $keys,
                acl: $acl,
                internal: false,
                doc: $crate::glue::commands::spec::Doc {
                    summary: $summary,
                    complexity: $complexity,
                    syntax: $syntax,
                    keys: $spec,
                },
            },
        )*];
    };
}
pub(crate) use commands;
