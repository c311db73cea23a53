//! `COMMAND DOCS` for every command, set with `RedisModule_SetCommandInfo`
//! where the server has it (Redis 7.0 and later, Valkey). Each command is
//! described by its SPEC syntax line, read by `core::syntax` into the
//! argument tree Redis wants, so the docs say exactly what the SPEC says.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

use redis_module::{raw, Context};

use crate::core::syntax::{self, ArgDoc, Kind};

/// Key spec flags (`REDISMODULE_CMD_KEY_*`).
const RO: u64 = 1;
const RW: u64 = 2;
const ACCESS: u64 = 16;
const UPDATE: u64 = 32;

/// How the keys are found: one at index 1, or `numkeys key [key ...]`.
#[derive(Clone, Copy)]
enum Keys {
    None,
    One(u64),
    Counted(u64),
}

struct Doc {
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    syntax: &'static str,
    keys: Keys,
}

// Redis takes one of INSERT, UPDATE and DELETE; a grant may create the
// key and a release delete it, but both read and change a value that may
// be there, which is UPDATE.
const GRANT: u64 = RW | ACCESS | UPDATE;
const GIVE_BACK: u64 = RW | ACCESS | UPDATE;
const RENEW: u64 = RW | ACCESS | UPDATE;
const LOOK: u64 = RO | ACCESS;
const SET: u64 = RW | UPDATE;

#[rustfmt::skip]
const DOCS: &[Doc] = &[
    Doc { name: "lock.acquire", summary: "Acquires (or reenters) a lock with a lease; replies its fencing token, nil when held by another holder.", complexity: "O(1)", syntax: "key holder ttl-ms [BLOCK timeout-ms] [KEEP]", keys: Keys::One(GRANT) },
    Doc { name: "lock.reenter", summary: "Reenters a lock the holder already holds; replies the new reentry count.", complexity: "O(1)", syntax: "key holder ttl-ms [KEEP]", keys: Keys::One(RENEW) },
    Doc { name: "lock.release", summary: "Releases one reentry of a lock; replies the count left, 0 when the lock is free.", complexity: "O(1)", syntax: "key holder", keys: Keys::One(GIVE_BACK) },
    Doc { name: "lock.extend", summary: "Resets the lease of a held lock.", complexity: "O(1)", syntax: "key holder ttl-ms [KEEP]", keys: Keys::One(RENEW) },
    Doc { name: "lock.info", summary: "Shows a lock's holder, count, fence, lease left, waiters and keep.", complexity: "O(1)", syntax: "key", keys: Keys::One(LOOK) },
    Doc { name: "lock.macquire", summary: "Acquires several locks all at once or none; replies their fences.", complexity: "O(N) where N is the number of keys", syntax: "numkeys key [key ...] holder ttl-ms [BLOCK timeout-ms] [KEEP]", keys: Keys::Counted(GRANT) },
    Doc { name: "lock.mrelease", summary: "Releases one reentry of each of several locks, all or none; replies the counts left.", complexity: "O(N) where N is the number of keys", syntax: "numkeys key [key ...] holder", keys: Keys::Counted(GIVE_BACK) },
    Doc { name: "lock.waitfor", summary: "Declares that a holder waits for a key (deadlock detection for clients that wait on their own side).", complexity: "O(E) where E is the number of wait edges reachable from the key", syntax: "key holder ttl-ms", keys: Keys::One(LOOK) },
    Doc { name: "lock.graph", summary: "Shows the wait-for graph: waiter, key, holders, ms left per edge, for keys the caller may read.", complexity: "O(E) where E is the number of wait edges", syntax: "[COUNT n]", keys: Keys::None },
    Doc { name: "sem.acquire", summary: "Takes permits of a counting semaphore with a lease per holder; replies the permits the holder holds, nil when not enough are free.", complexity: "O(log N) where N is the number of holders", syntax: "key holder limit ttl-ms [PERMITS n] [BLOCK timeout-ms] [KEEP]", keys: Keys::One(GRANT) },
    Doc { name: "sem.release", summary: "Gives back permits of a semaphore (all by default); replies the permits left.", complexity: "O(log N) where N is the number of holders", syntax: "key holder [PERMITS n]", keys: Keys::One(GIVE_BACK) },
    Doc { name: "sem.extend", summary: "Resets a semaphore holder's lease.", complexity: "O(log N) where N is the number of holders", syntax: "key holder ttl-ms [PERMITS n] [KEEP]", keys: Keys::One(RENEW) },
    Doc { name: "sem.info", summary: "Shows a semaphore's limit, used and available permits, holders, waiters and keep.", complexity: "O(N) where N is the number of holders", syntax: "key", keys: Keys::One(LOOK) },
    Doc { name: "rwlock.acquire", summary: "Takes a read or write hold of a fair read-write lock; replies the holder's fence, nil when refused.", complexity: "O(log N) where N is the number of holders", syntax: "key holder READ|WRITE ttl-ms [BLOCK timeout-ms] [KEEP]", keys: Keys::One(GRANT) },
    Doc { name: "rwlock.release", summary: "Releases one read or write hold; replies [reads, writes] left.", complexity: "O(log N) where N is the number of holders", syntax: "key holder READ|WRITE", keys: Keys::One(GIVE_BACK) },
    Doc { name: "rwlock.extend", summary: "Resets a read-write lock holder's lease.", complexity: "O(log N) where N is the number of holders", syntax: "key holder ttl-ms [KEEP]", keys: Keys::One(RENEW) },
    Doc { name: "rwlock.info", summary: "Shows a read-write lock's mode, holders, waiters and keep.", complexity: "O(N) where N is the number of holders", syntax: "key", keys: Keys::One(LOOK) },
    Doc { name: "padlock.lockset", summary: "Effect (replication stream and AOF only): sets a lock's state as replicas and the AOF receive it.", complexity: "O(1)", syntax: "key holder count fence deadline-ms", keys: Keys::One(SET) },
    Doc { name: "padlock.semset", summary: "Effect (replication stream and AOF only): sets a semaphore holder's state as replicas and the AOF receive it.", complexity: "O(log N) where N is the number of holders", syntax: "key holder limit permits deadline-ms", keys: Keys::One(SET) },
    Doc { name: "padlock.rwset", summary: "Effect (replication stream and AOF only): sets a read-write lock holder's state as replicas and the AOF receive it.", complexity: "O(log N) where N is the number of holders", syntax: "key holder reads writes fence deadline-ms", keys: Keys::One(SET) },
];

/// The release every command first appeared in.
const SINCE: &CStr = c"1.0.0";

/// A string Redis keeps a pointer to: made once at load, never freed.
fn leak(s: &str) -> *const c_char {
    CString::new(s).map_or(ptr::null(), |c| c.into_raw() as *const c_char)
}

/// A zero-terminated array Redis reads: made once at load, never freed.
fn leak_array<T>(mut items: Vec<T>) -> *mut T {
    // SAFETY: these are plain C structs for which all zeroes is the
    // terminator Redis looks for.
    items.push(unsafe { std::mem::zeroed() });
    Box::leak(items.into_boxed_slice()).as_mut_ptr()
}

fn arg(a: &ArgDoc) -> raw::RedisModuleCommandArg {
    let kind = match a.kind {
        Kind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Kind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Kind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        Kind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
    };
    let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
    if a.optional {
        flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
    }
    if a.multiple {
        flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
    }
    raw::RedisModuleCommandArg {
        name: leak(&a.name),
        type_: kind,
        key_spec_index: if a.kind == Kind::Key { 0 } else { -1 },
        token: a.token.as_deref().map_or(ptr::null(), leak),
        summary: ptr::null(),
        since: ptr::null(),
        flags: flags as c_int,
        deprecated_since: ptr::null(),
        subargs: if a.choices.is_empty() {
            ptr::null_mut()
        } else {
            leak_array(a.choices.iter().map(arg).collect())
        },
        display_text: ptr::null(),
    }
}

fn key_spec(keys: Keys) -> Option<raw::RedisModuleCommandKeySpec> {
    let (flags, counted) = match keys {
        Keys::None => return None,
        Keys::One(f) => (f, false),
        Keys::Counted(f) => (f, true),
    };
    let fk = if counted {
        raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            keynum: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                keynumidx: 0,
                firstkey: 1,
                keystep: 1,
            },
        }
    } else {
        raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        }
    };
    Some(raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags,
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 },
        },
        find_keys_type: if counted {
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM
        } else {
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE
        },
        fk,
    })
}

/// Redis' arity: positive is exact, negative a minimum (the name counts).
fn arity(args: &[ArgDoc]) -> c_int {
    let required = args.iter().filter(|a| !a.optional).count() as c_int + 1;
    if args.iter().any(|a| a.optional || a.multiple) {
        -required
    } else {
        required
    }
}

static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Every command name that has docs (the table's test checks all do).
#[cfg(test)]
pub fn documented() -> impl Iterator<Item = &'static str> {
    DOCS.iter().map(|d| d.name)
}

/// Sets the docs of every registered command, where the server can.
pub fn register(ctx: &Context) {
    // SAFETY: reading the API table, written once at load.
    let (Some(set), Some(get)) = (unsafe { raw::RedisModule_SetCommandInfo }, unsafe {
        raw::RedisModule_GetCommand
    }) else {
        return;
    };
    for d in DOCS {
        let args = match syntax::parse(d.syntax) {
            Ok(a) => a,
            Err(why) => {
                ctx.log_warning(&format!("padlock: docs of {}: {why}", d.name));
                continue;
            }
        };
        let info = raw::RedisModuleCommandInfo {
            version: &VERSION,
            summary: leak(d.summary),
            complexity: leak(d.complexity),
            since: SINCE.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: arity(&args),
            key_specs: key_spec(d.keys).map_or(ptr::null_mut(), |k| leak_array(vec![k])),
            args: if args.is_empty() {
                ptr::null_mut()
            } else {
                leak_array(args.iter().map(arg).collect())
            },
        };
        let Ok(name) = CString::new(d.name) else {
            continue;
        };
        // SAFETY: called from OnLoad after the command was created; every
        // pointer in `info` lives as long as the module.
        let ok = unsafe {
            let command = get(ctx.ctx, name.as_ptr());
            !command.is_null() && set(command, &info) == raw::REDISMODULE_OK as c_int
        };
        if !ok {
            ctx.log_warning(&format!("padlock: could not set the docs of {}", d.name));
        }
    }
}
