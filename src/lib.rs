//! padlock: native distributed locks, semaphores, fencing tokens and
//! deadlock detection for Redis. This file only registers the module; the
//! rules live in `core`, the Redis side in `glue`.

pub mod core;
mod glue;

use redis_module::configuration::ConfigurationFlags;
use redis_module::redis_module;

use glue::commands as cmd;
use glue::config::{
    MAX_HOLDER_LEN, MAX_HOLDER_LEN_CEILING, MAX_TTL_MS, MAX_TTL_MS_CEILING, RESTART_GRACE,
};

// Mandatory ACL categories are `AclCategory::None`: anything else stops the
// module from loading on Redis 7.0. The real categories are set in `init`.
redis_module! {
    name: "padlock",
    version: 1,
    allocator: (glue::alloc::PadlockAlloc, glue::alloc::PadlockAlloc),
    data_types: [LOCK_TYPE, SEM_TYPE],
    init: glue_init,
    commands: [
        ["lock.acquire", cmd::lock_acquire, "write deny-oom fast", 1, 1, 1, AclCategory::None],
        ["lock.reenter", cmd::lock_reenter, "write deny-oom fast", 1, 1, 1, AclCategory::None],
        ["lock.release", cmd::lock_release, "write fast", 1, 1, 1, AclCategory::None],
        ["lock.extend", cmd::lock_extend, "write deny-oom fast", 1, 1, 1, AclCategory::None],
        ["lock.info", cmd::lock_info, "readonly fast", 1, 1, 1, AclCategory::None],
        ["lock.macquire", cmd::lock_macquire, "write deny-oom getkeys-api", 0, 0, 0, AclCategory::None],
        ["lock.mrelease", cmd::lock_mrelease, "write getkeys-api", 0, 0, 0, AclCategory::None],
        ["lock.waitfor", cmd::lock_waitfor, "write fast", 1, 1, 1, AclCategory::None],
        ["lock.graph", cmd::lock_graph, "readonly", 0, 0, 0, AclCategory::None],
        ["sem.acquire", cmd::sem_acquire, "write deny-oom fast", 1, 1, 1, AclCategory::None],
        ["sem.release", cmd::sem_release, "write fast", 1, 1, 1, AclCategory::None],
        ["sem.extend", cmd::sem_extend, "write deny-oom fast", 1, 1, 1, AclCategory::None],
        ["sem.info", cmd::sem_info, "readonly", 1, 1, 1, AclCategory::None],
        // Internal (replication, AOF): `admin` keeps them out of ordinary
        // users' reach, `+@padlock` does not grant them.
        ["padlock.lockset", cmd::padlock_lockset, "write deny-oom admin", 1, 1, 1, AclCategory::None],
        ["padlock.semset", cmd::padlock_semset, "write deny-oom admin", 1, 1, 1, AclCategory::None],
    ],
    event_handlers: [
        [@EXPIRED @EVICTED: glue::on_key_event],
        [@GENERIC: glue::on_generic_event],
    ],
    configurations: [
        i64: [
            ["max-ttl-ms", &MAX_TTL_MS, 86_400_000, 1, MAX_TTL_MS_CEILING, ConfigurationFlags::DEFAULT, None],
            ["max-holder-len", &MAX_HOLDER_LEN, 512, 1, MAX_HOLDER_LEN_CEILING, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            ["restart-grace-ms", &RESTART_GRACE, "0", ConfigurationFlags::DEFAULT, None],
        ],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}

use glue::types::{LOCK_TYPE, SEM_TYPE};

fn glue_init(
    ctx: &redis_module::Context,
    args: &[redis_module::RedisString],
) -> redis_module::Status {
    glue::init(ctx, args)
}
