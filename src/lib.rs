//! padlock: native distributed locks, semaphores, fencing tokens and
//! deadlock detection for Redis. This file only registers the module; the
//! rules live in `core`, the Redis side in `glue`.

pub mod core;
mod glue;

use redis_module::configuration::ConfigurationFlags;
use redis_module::redis_module;

use glue::config::{
    MAX_HOLDER_LEN, MAX_HOLDER_LEN_CEILING, MAX_TTL_MS, MAX_TTL_MS_CEILING, MAX_WAITERS,
    MAX_WAITERS_CEILING, MAX_WAITERS_PER_KEY, RESTART_GRACE,
};

// Commands are registered in `init` from the one command table
// (`glue::table`), with their ACL categories where the server has them.
redis_module! {
    name: "padlock",
    version: 1,
    allocator: (glue::alloc::PadlockAlloc, glue::alloc::PadlockAlloc),
    data_types: [LOCK_TYPE, SEM_TYPE, RWLOCK_TYPE],
    init: glue_init,
    event_handlers: [
        [@EXPIRED @EVICTED: glue::events::on_key_event],
        [@GENERIC: glue::events::on_generic_event],
    ],
    configurations: [
        i64: [
            ["max-ttl-ms", &MAX_TTL_MS, 86_400_000, 1, MAX_TTL_MS_CEILING, ConfigurationFlags::DEFAULT, None],
            ["max-holder-len", &MAX_HOLDER_LEN, 512, 1, MAX_HOLDER_LEN_CEILING, ConfigurationFlags::DEFAULT, None],
            ["max-waiters-per-key", &MAX_WAITERS_PER_KEY, 10_000, 1, MAX_WAITERS_CEILING, ConfigurationFlags::DEFAULT, None],
            ["max-waiters", &MAX_WAITERS, 100_000, 1, MAX_WAITERS_CEILING, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            ["restart-grace-ms", &RESTART_GRACE, "0", ConfigurationFlags::DEFAULT, None],
        ],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}

use glue::types::{LOCK_TYPE, RWLOCK_TYPE, SEM_TYPE};

fn glue_init(
    ctx: &redis_module::Context,
    args: &[redis_module::RedisString],
) -> redis_module::Status {
    glue::init(ctx, args)
}
