//! The Redis side: parse, open keys, call the core, commit, reply. A map
//! for new contributors is in docs/design.md ("Where things live").

/// A Redis module API function pointer. All the ones padlock uses exist
/// from Redis 7.0 on; a server without one cannot have loaded the module.
macro_rules! rm {
    ($name:ident) => {
        // Used inside `unsafe` blocks only: the API table is written once,
        // at load, before any command or callback runs.
        match redis_module::raw::$name {
            Some(f) => f,
            None => $crate::glue::server::missing_api(stringify!($name)),
        }
    };
}

mod acl;
pub mod alloc;
mod blocking;
mod commands;
mod commit;
pub mod config;
mod docs;
pub mod events;
pub mod eviction;
mod fences;
mod grace;
mod guard;
mod info;
mod keep;
mod key;
mod kinds;
mod leaving;
mod mailbox;
mod percentiles;
mod replicate;
mod report;
mod requests;
mod server;
mod table;
mod timer;
pub mod types;
mod waiting;

use redis_module::{Context, RedisString, Status};

pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    std::panic::set_hook(Box::new(|p| {
        eprintln!("padlock: internal error (panic): {p}");
    }));
    let raw_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    if let Err(why) = crate::core::settings::check_load_args(&raw_args) {
        ctx.log_warning(&format!("padlock: refusing to load: {why}"));
        return Status::Err;
    }
    config::start_grace(server::now_ms());
    // HANDLE_IO_ERRORS: a damaged RESTORE payload or RDB file makes a load
    // fail (and be refused) instead of aborting the server.
    let options = redis_module::raw::ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED
        | redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS;
    let bits = options.bits();
    ctx.set_module_options(options);
    if server::is_valkey() {
        server::set_valkey_options(ctx, bits);
    }
    if types::register(ctx) == Status::Err || table::register(ctx) == Status::Err {
        return Status::Err;
    }
    waiting::init(ctx);
    keep::init(ctx, (kinds::thaw, kinds::lease_end));
    requests::init(ctx);
    events::subscribe(ctx);
    eviction::init(ctx);
    grace::init(ctx);
    report::register(ctx);
    Status::Ok
}
