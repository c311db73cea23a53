//! The one command table. Registration, the C handlers and the ACL
//! categories all come from it, so a command cannot exist without its
//! categories, nor be listed twice. Adding a command is one line here plus
//! its body in `commands/`.

use std::ffi::{CStr, CString};
use std::mem::ManuallyDrop;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisString, Status};

use super::commands::{self as cmd, Body};
use super::guard;
use super::replicate;
use super::server;
use super::waiting;

type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

struct Command {
    name: &'static CStr,
    handler: Handler,
    /// Redis command flags.
    flags: &'static CStr,
    /// Legacy key positions: first, last, step (0, 0, 0 with `getkeys-api`).
    keys: (c_int, c_int, c_int),
    /// ACL categories where the server supports them; `admin` commands do
    /// not join `@padlock`.
    acl: &'static str,
}

/// Runs a body so that a bug can only ever turn into an error reply, never
/// a crashed server.
fn handle(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    body: Body,
) -> c_int {
    let context = Context::new(ctx);
    let failed = Err(RedisError::Str(
        "ERR padlock internal error, see the server log",
    ));
    let response = guard::call(failed, || {
        let result = with_args(argv, argc, |args| body(&context, args));
        // The one place a command's writes reach the waiting engine.
        waiting::serve_ready(&context);
        server::reply(result)
    });
    context.reply(response) as c_int
}

/// Arguments most commands fit in without a heap allocation.
const INLINE_ARGS: usize = 8;

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
    let borrow = |&s: &*mut raw::RedisModuleString| {
        ManuallyDrop::new(RedisString::from_redis_module_string(
            std::ptr::null_mut(),
            s,
        ))
    };
    let mut inline = [NO_ARG; INLINE_ARGS];
    let heap: Vec<ManuallyDrop<RedisString>>;
    let args: &[ManuallyDrop<RedisString>] = if strings.len() <= INLINE_ARGS {
        for (slot, s) in inline.iter_mut().zip(strings) {
            *slot = borrow(s);
        }
        &inline[..strings.len()]
    } else {
        heap = strings.iter().map(borrow).collect();
        &heap
    };
    // SAFETY: ManuallyDrop<T> has T's layout (repr(transparent)); the
    // strings are never dropped, so none is freed that padlock does not own.
    let args = unsafe { &*(args as *const [ManuallyDrop<RedisString>] as *const [RedisString]) };
    replicate::during_command(strings.as_ptr(), strings.len(), || f(args))
}

macro_rules! commands {
    ($($name:literal => $body:path, $flags:literal, $keys:expr, $acl:literal;)*) => {
        const COMMANDS: &[Command] = &[$(
            Command {
                name: $name,
                handler: {
                    extern "C" fn h(
                        ctx: *mut raw::RedisModuleCtx,
                        argv: *mut *mut raw::RedisModuleString,
                        argc: c_int,
                    ) -> c_int {
                        handle(ctx, argv, argc, $body)
                    }
                    h
                },
                flags: $flags,
                keys: $keys,
                acl: $acl,
            },
        )*];
    };
}

commands! {
    c"lock.acquire" => cmd::lock::acquire, c"write deny-oom fast", (1, 1, 1), "write fast";
    c"lock.reenter" => cmd::lock::reenter, c"write deny-oom fast", (1, 1, 1), "write fast";
    c"lock.release" => cmd::lock::release, c"write fast", (1, 1, 1), "write fast";
    c"lock.extend" => cmd::lock::extend, c"write fast", (1, 1, 1), "write fast";
    c"lock.info" => cmd::lock::info, c"readonly fast", (1, 1, 1), "read fast";
    c"lock.macquire" => cmd::lock::macquire, c"write deny-oom getkeys-api", (0, 0, 0), "write";
    c"lock.mrelease" => cmd::lock::mrelease, c"write getkeys-api", (0, 0, 0), "write";
    c"lock.waitfor" => cmd::lock::waitfor, c"write deny-oom fast", (1, 1, 1), "write fast";
    c"lock.graph" => cmd::lock::graph, c"readonly", (0, 0, 0), "read";
    c"sem.acquire" => cmd::sem::acquire, c"write deny-oom fast", (1, 1, 1), "write fast";
    c"sem.release" => cmd::sem::release, c"write fast", (1, 1, 1), "write fast";
    c"sem.extend" => cmd::sem::extend, c"write fast", (1, 1, 1), "write fast";
    c"sem.info" => cmd::sem::info, c"readonly", (1, 1, 1), "read";
    c"rwlock.acquire" => cmd::rwlock::acquire, c"write deny-oom fast", (1, 1, 1), "write fast";
    c"rwlock.release" => cmd::rwlock::release, c"write fast", (1, 1, 1), "write fast";
    c"rwlock.extend" => cmd::rwlock::extend, c"write fast", (1, 1, 1), "write fast";
    c"rwlock.info" => cmd::rwlock::info, c"readonly", (1, 1, 1), "read";
    // Effects (replication, AOF only): `internal` where the server knows
    // the flag (see `register`); the bodies refuse any other caller, and
    // `admin` keeps them out of `+@padlock` and `+@write`.
    c"padlock.lockset" => cmd::internal::lockset, c"write admin", (1, 1, 1), "write admin dangerous";
    c"padlock.semset" => cmd::internal::semset, c"write admin", (1, 1, 1), "write admin dangerous";
    c"padlock.rwset" => cmd::internal::rwset, c"write admin", (1, 1, 1), "write admin dangerous";
}

/// Registers every command, then its ACL categories where the server has
/// them (Redis 7.0 has none for module commands; `redis_module!` would
/// refuse to load there if they were mandatory).
pub fn register(ctx: &Context) -> Status {
    for c in COMMANDS {
        // An effect command is first offered as `internal` (Redis 8.0+:
        // unknown to clients, absent from `COMMAND`, still applied from the
        // master link and the AOF); servers without the flag refuse it, and
        // then it is registered as it is.
        let internal = c
            .name
            .to_bytes()
            .starts_with(b"padlock.")
            .then(|| CString::new(format!("{} internal", c.flags.to_string_lossy())).ok())
            .flatten();
        let mut status = match &internal {
            Some(flags) => create(ctx, c, flags),
            None => raw::REDISMODULE_ERR as c_int,
        };
        if status != raw::REDISMODULE_OK as c_int {
            status = create(ctx, c, c.flags);
        }
        if status != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!("padlock: could not register {:?}", c.name));
            return Status::Err;
        }
    }
    set_acl_categories(ctx);
    super::docs::register(ctx);
    Status::Ok
}

fn create(ctx: &Context, c: &Command, flags: &CStr) -> c_int {
    let (first, last, step) = c.keys;
    // SAFETY: called from OnLoad with C strings that outlive the call.
    unsafe {
        rm!(RedisModule_CreateCommand)(
            ctx.ctx,
            c.name.as_ptr(),
            Some(c.handler),
            flags.as_ptr(),
            first,
            last,
            step,
        )
    }
}

fn set_acl_categories(ctx: &Context) {
    // SAFETY: reading the API table, written once at load.
    let (set, get, add) = unsafe {
        (
            raw::RedisModule_SetCommandACLCategories,
            raw::RedisModule_GetCommand,
            raw::RedisModule_AddACLCategory,
        )
    };
    let (Some(set), Some(get)) = (set, get) else {
        return;
    };
    // SAFETY: called from OnLoad, as the API requires.
    let own = add.is_some_and(|add| unsafe { add(ctx.ctx, c"padlock".as_ptr()) == 0 });
    for c in COMMANDS {
        let with_own = if c.acl.contains("admin") || !own {
            c.acl.to_string()
        } else {
            format!("{} padlock", c.acl)
        };
        let Ok(cats) = CString::new(with_own) else {
            continue;
        };
        // SAFETY: the command was registered just before.
        unsafe {
            let command = get(ctx.ctx, c.name.as_ptr());
            if !command.is_null() {
                set(command, cats.as_ptr());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::COMMANDS;
    use crate::glue::docs::documented;

    #[test]
    fn every_command_has_docs_and_every_doc_a_command() {
        let mut names: Vec<_> = COMMANDS
            .iter()
            .map(|c| c.name.to_str().unwrap_or(""))
            .collect();
        let mut docs: Vec<_> = documented().collect();
        names.sort();
        docs.sort();
        assert_eq!(names, docs);
    }
}
