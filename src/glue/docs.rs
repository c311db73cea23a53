//! `COMMAND DOCS` for every command, set with `RedisModule_SetCommandInfo`
//! where the server has it (Redis 7.0 and later, Valkey). Each command is
//! described by its syntax line (docs/commands.md), read by `core::syntax` into the
//! argument tree Redis wants, so the docs say exactly what docs/commands.md says.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

use redis_module::{raw, Context};

use super::commands::spec::{Command, Keys, POST};
use crate::core::syntax::{self, ArgDoc, Kind};

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
        Kind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
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

/// The key specs of a command: its key(s), then its mailbox if it takes
/// one (`MAILBOX mailbox-key`, searched for after the positional
/// arguments, so that cluster routing, `CROSSSLOT` and ACL key patterns
/// see it as they see the lock key).
fn key_specs(keys: Keys) -> Vec<raw::RedisModuleCommandKeySpec> {
    let (flags, counted) = match keys {
        Keys::None => return vec![],
        Keys::One(f) => (f, false),
        Keys::Counted(f) => (f, true),
        Keys::Mailbox(k, from) => {
            let mut specs = key_specs(*k);
            specs.push(mailbox_spec(from));
            return specs;
        }
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
        one_key()
    };
    vec![raw::RedisModuleCommandKeySpec {
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
    }]
}

fn one_key() -> raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
    raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
        range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
            lastkey: 0,
            keystep: 1,
            limit: 0,
        },
    }
}

fn mailbox_spec(from: c_int) -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes: leak("the mailbox outcomes are appended to"),
        flags: POST,
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            keyword: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_2 {
                keyword: leak("MAILBOX"),
                startfrom: from,
            },
        },
        find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
        fk: one_key(),
    }
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

/// Sets the docs of every registered command, where the server can.
pub fn register(ctx: &Context, all: &[Command]) {
    // SAFETY: reading the API table, written once at load.
    let (Some(set), Some(get)) = (unsafe { raw::RedisModule_SetCommandInfo }, unsafe {
        raw::RedisModule_GetCommand
    }) else {
        return;
    };
    for c in all {
        let d = &c.doc;
        let args = match syntax::parse(d.syntax) {
            Ok(a) => a,
            Err(why) => {
                ctx.log_warning(&format!("padlock: docs of {:?}: {why}", c.name));
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
            key_specs: match key_specs(d.keys) {
                specs if specs.is_empty() => ptr::null_mut(),
                specs => leak_array(specs),
            },
            args: if args.is_empty() {
                ptr::null_mut()
            } else {
                leak_array(args.iter().map(arg).collect())
            },
        };
        // SAFETY: called from OnLoad after the command was created; every
        // pointer in `info` lives as long as the module.
        let ok = unsafe {
            let command = get(ctx.ctx, c.name.as_ptr());
            !command.is_null() && set(command, &info) == raw::REDISMODULE_OK as c_int
        };
        if !ok {
            ctx.log_warning(&format!("padlock: could not set the docs of {:?}", c.name));
        }
    }
}
