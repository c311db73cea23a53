//! padlock: native distributed locks, semaphores, fencing tokens and
//! deadlock detection for Redis. This file only registers the module; the
//! rules live in `core`, the Redis side in `glue`.

#![deny(unsafe_op_in_unsafe_fn)]

/// The rules, in their own crate (`core/`): no Redis dependency, no
/// unsafe code.
use padlock_core as core;
mod glue;

use redis_module::configuration::ConfigurationFlags;
use redis_module::redis_module;

use core::settings as s;
use glue::config::{
    EVICTION, ID_MEMORY_MS, KEEP_MAX_IDLE_MS, KEEP_MIN_INTERVAL_MS, MAILBOX_TTL_MS, MAX_HOLDER_LEN,
    MAX_IDS_PER_HOLDER, MAX_REMEMBERED_IDS, MAX_TTL_MS, MAX_WAITERS, MAX_WAITERS_PER_KEY,
    MAX_WAIT_EDGES, RESTART_GRACE,
};

// Data types and commands are registered in `init`: the types from the one
// list of kinds (`glue::types::with_kinds!`), the commands from
// `glue::commands::all()` with their ACL categories where the server has
// them.
redis_module! {
    name: "padlock",
    // 1.0.0, as Redis modules write versions (major * 10000 + minor * 100
    // + patch): the crates, COMMAND DOCS' `since` and the clients agree.
    version: 10000,
    allocator: (glue::alloc::PadlockAlloc, glue::alloc::PadlockAlloc),
    data_types: [],
    init: glue_init,
    event_handlers: [
        [@EXPIRED @EVICTED: glue::events::on_key_event],
        [@GENERIC: glue::events::on_generic_event],
    ],
    configurations: [
        i64: [
            [s::MAX_TTL_MS.name, &MAX_TTL_MS, s::MAX_TTL_MS.default, s::MAX_TTL_MS.min, s::MAX_TTL_MS.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_HOLDER_LEN_SETTING.name, &MAX_HOLDER_LEN, s::MAX_HOLDER_LEN_SETTING.default, s::MAX_HOLDER_LEN_SETTING.min, s::MAX_HOLDER_LEN_SETTING.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_WAITERS_PER_KEY.name, &MAX_WAITERS_PER_KEY, s::MAX_WAITERS_PER_KEY.default, s::MAX_WAITERS_PER_KEY.min, s::MAX_WAITERS_PER_KEY.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_WAITERS.name, &MAX_WAITERS, s::MAX_WAITERS.default, s::MAX_WAITERS.min, s::MAX_WAITERS.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_WAIT_EDGES.name, &MAX_WAIT_EDGES, s::MAX_WAIT_EDGES.default, s::MAX_WAIT_EDGES.min, s::MAX_WAIT_EDGES.max, ConfigurationFlags::DEFAULT, None],
            [s::KEEP_MAX_IDLE_MS.name, &KEEP_MAX_IDLE_MS, s::KEEP_MAX_IDLE_MS.default, s::KEEP_MAX_IDLE_MS.min, s::KEEP_MAX_IDLE_MS.max, ConfigurationFlags::DEFAULT, None],
            [s::KEEP_MIN_INTERVAL_MS.name, &KEEP_MIN_INTERVAL_MS, s::KEEP_MIN_INTERVAL_MS.default, s::KEEP_MIN_INTERVAL_MS.min, s::KEEP_MIN_INTERVAL_MS.max, ConfigurationFlags::DEFAULT, None],
            [s::ID_MEMORY_MS.name, &ID_MEMORY_MS, s::ID_MEMORY_MS.default, s::ID_MEMORY_MS.min, s::ID_MEMORY_MS.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_IDS_PER_HOLDER.name, &MAX_IDS_PER_HOLDER, s::MAX_IDS_PER_HOLDER.default, s::MAX_IDS_PER_HOLDER.min, s::MAX_IDS_PER_HOLDER.max, ConfigurationFlags::DEFAULT, None],
            [s::MAX_REMEMBERED_IDS.name, &MAX_REMEMBERED_IDS, s::MAX_REMEMBERED_IDS.default, s::MAX_REMEMBERED_IDS.min, s::MAX_REMEMBERED_IDS.max, ConfigurationFlags::DEFAULT, None],
            [s::MAILBOX_TTL_MS.name, &MAILBOX_TTL_MS, s::MAILBOX_TTL_MS.default, s::MAILBOX_TTL_MS.min, s::MAILBOX_TTL_MS.max, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            [s::RESTART_GRACE_MS, &RESTART_GRACE, s::RESTART_GRACE_DEFAULT, ConfigurationFlags::DEFAULT, None],
            [s::EVICTION, &EVICTION, s::EVICTION_DEFAULT, ConfigurationFlags::DEFAULT, None],
        ],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}

fn glue_init(
    ctx: &redis_module::Context,
    args: &[redis_module::RedisString],
) -> redis_module::Status {
    glue::init(ctx, args)
}
