//! Registration: every command of `commands::all()` (the families' rows
//! and the kinds' state commands), then its ACL categories where the
//! server has them, then its `COMMAND DOCS`.

use std::ffi::{CStr, CString};
use std::os::raw::c_int;

use redis_module::{raw, Context, Status};

use super::commands::{self, spec::Command};

/// Registers every command, then its ACL categories where the server has
/// them (Redis 7.0 has none for module commands; `redis_module!` would
/// refuse to load there if they were mandatory).
pub fn register(ctx: &Context) -> Status {
    let all = commands::all();
    for c in &all {
        // An state command is first offered as `internal` (Redis 8.0+:
        // unknown to clients, absent from `COMMAND`, still applied from the
        // master link and the AOF); servers without the flag refuse it, and
        // then it is registered as it is.
        let internal = c
            .internal
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
    set_acl_categories(ctx, &all);
    super::docs::register(ctx, &all);
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

fn set_acl_categories(ctx: &Context, all: &[Command]) {
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
    for c in all {
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
    use super::commands;

    #[test]
    fn every_command_once_with_docs_that_parse() {
        let all = commands::all();
        let mut names: Vec<_> = all.iter().map(|c| c.name.to_str().unwrap_or("")).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "no command twice");
        for c in &all {
            assert!(
                crate::core::syntax::parse(c.doc.syntax).is_ok(),
                "{:?}",
                c.name
            );
            assert!(!c.doc.summary.is_empty() && c.doc.complexity.starts_with("O("));
        }
    }
}
