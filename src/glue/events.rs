//! Keyspace and server events padlock listens to.

use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, ContextFlags, NotifyEvent, RedisString};

use super::blocking;
use super::config;
use super::eviction;
use super::fences;
use super::guard;
use super::info;
use super::keep;
use super::key::Key;
use super::leaving;
use super::server::{self, notify, now_ms};
use super::timer;
use super::types;
use super::waiting;

/// `expired` / `evicted`: a whole key that ran out, counted under its
/// kind, or a held value evicted (see `eviction`).
pub fn on_key_event(ctx: &Context, event: NotifyEvent, _name: &str, key: &[u8]) {
    guard::call((), || {
        let Some(gone) = types::take_unlinked(key) else {
            return;
        };
        let kind = gone.kind;
        if event.contains(NotifyEvent::EVICTED) {
            eviction::evicted(ctx, kind, key);
        } else if event.contains(NotifyEvent::EXPIRED) {
            info::bump(&kind.counters.expired);
            let now = now_ms();
            for (since, end) in gone.spans {
                let end = if end > 0 { end.min(now) } else { now };
                kind.holds.held(since, end);
            }
            notify(
                ctx,
                kind.expired_event,
                &RedisString::create_from_slice(ctx.ctx, key),
            );
        }
    })
}

/// Generic events. A lease moved by hand (`PEXPIRE`, `EXPIREAT`, ...) must move the
/// hand-off timer of the key's waiters. A bound lease's far deadline that
/// reaches a master from another master's stream (an atomic slot
/// migration: replicated, yet this node is a master) or a key brought to a
/// new name, database or copy is thawed where no binding keeps it
/// (`keep::arrived`, `keep::moved_in`). Plain clients' `SET ... PX` fire
/// `expire` too: unless such a stream arrived lately, they pay a name
/// compare and a clock read, nothing more.
pub fn on_generic_event(ctx: &Context, _event: NotifyEvent, name: &str, key: &[u8]) {
    match name {
        "expire" => guard::call((), || {
            waiting::expiry_changed(key);
            by_client(ctx, key);
            let flags = keep::stream_recent().then(|| ctx.get_flags());
            if let Some(f) = flags.filter(|f| f.contains(ContextFlags::REPLICATED)) {
                let name = RedisString::create_from_slice(ctx.ctx, key);
                let at = Key::read(ctx, &name).expire_at();
                if let Some(at) = at {
                    keep::arrived(ctx, f, key, at);
                }
            }
        }),
        // A client's own expiry: the key keeps it, and no binding keeps
        // the lease any more (replicas and the AOF only apply effects).
        "persist" => guard::call((), || by_client(ctx, key)),
        "move_from" => guard::call((), || {
            MOVED_FROM.set(blocking::selected_db(ctx));
            // Its waiters here see a free key.
            timer::note_removed(key);
        }),
        "rename_from" => guard::call((), || timer::note_removed(key)),
        "move_to" => guard::call((), || {
            keep::moved_in(ctx, key);
            // Valkey 8.1 runs subscribers on the calling client, selected
            // on the event's database, and leaves it there (fixed by
            // valkey-io/valkey#4024): `MOVE` would leave the caller on the
            // destination. Back to the source, where it was.
            let from = MOVED_FROM.replace(-1);
            if from >= 0 {
                // SAFETY: live context; `from` was selected a moment ago.
                unsafe { rm!(RedisModule_SelectDb)(ctx.ctx, from) };
            }
        }),
        "rename_to" | "copy_to" | "restore" => {
            guard::call((), || keep::moved_in(ctx, key));
        }
        _ => {}
    }
}

/// An expiry set on `key` by a client of this master (not an effect
/// from the master link or the AOF, nor a migration's stream).
fn by_client(ctx: &Context, key: &[u8]) {
    if !keep::any_bound() {
        return;
    }
    let f = ctx.get_flags();
    if f.contains(ContextFlags::MASTER)
        && !f.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        keep::expiry_set(ctx, key);
    }
}

thread_local! {
    /// The database `MOVE` took a key from (its `move_from` event comes
    /// right before `move_to`).
    static MOVED_FROM: std::cell::Cell<i32> = const { std::cell::Cell::new(-1) };
}

/// A connection closed (`freeClient`): the requests it queued through a
/// mailbox go with it, and what it bound with `KEEP` runs out.
unsafe extern "C" fn on_client_change(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED {
        return;
    }
    // SAFETY: for this event Redis passes a live RedisModuleClientInfo.
    let Some(info) = (unsafe { (data as *const raw::RedisModuleClientInfo).as_ref() }) else {
        return;
    };
    guard::call((), || {
        waiting::client_gone(info.id);
        keep::client_closed(info.id);
    });
}

pub fn subscribe(ctx: &Context) {
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_CLIENT_CHANGE, on_client_change);
    blocking::subscribe(
        ctx,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        on_role_changed,
    );
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_SWAPDB, on_swapdb);
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_FLUSHDB, on_flush);
    // Redis 8.4+ and Valkey 9+ (elsewhere the subscriptions are refused,
    // and nothing happens). Valkey numbers its events its own way: its
    // atomic slot migration has Redis' trim id, and Redis' migration id
    // may be another Valkey event.
    if server::is_valkey() {
        blocking::subscribe(ctx, VALKEY_ATOMIC_SLOT_MIGRATION, on_valkey_slot_migration);
    } else {
        blocking::subscribe(
            ctx,
            raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION,
            on_slot_migration,
        );
        blocking::subscribe(
            ctx,
            raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION_TRIM,
            on_slot_migration,
        );
    }
    // A subscriber to trimmed keys makes Redis trim a slot that moved away
    // on the main thread, key by key, through the types' own callbacks,
    // instead of freeing padlock's values on a background thread.
    // SAFETY: from OnLoad; both functions exist where the flag does.
    unsafe {
        if let (Some(all), Some(sub)) = (
            raw::RedisModule_GetKeyspaceNotificationFlagsAll,
            raw::RedisModule_SubscribeToKeyspaceEvents,
        ) {
            if all() & raw::REDISMODULE_NOTIFY_KEY_TRIMMED != 0 {
                sub(
                    ctx.ctx,
                    raw::REDISMODULE_NOTIFY_KEY_TRIMMED,
                    Some(on_trimmed),
                );
            }
        }
    }
}

/// A key of a slot that moved away was trimmed: nothing to do beyond what
/// its type's unlink callback noted.
unsafe extern "C" fn on_trimmed(
    _ctx: *mut raw::RedisModuleCtx,
    _type: std::os::raw::c_int,
    _event: *const std::os::raw::c_char,
    _key: *mut raw::RedisModuleString,
) -> std::os::raw::c_int {
    raw::REDISMODULE_OK as std::os::raw::c_int
}

/// Redis 8.4+ atomic slot migration: the source sends the destination its
/// fence counter (so every fence the destination hands out for the moved
/// keys is above every fence the source handed out) and the moving keys'
/// request-ids; what would post to the moving slots' mailboxes later is
/// settled when the move begins; waiters of slots that moved away are sent
/// after them.
unsafe extern "C" fn on_slot_migration(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::call((), || {
        if eid.id == raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION {
            // SAFETY: this event's data is the migration's info.
            let slots = || unsafe { moving_slots(data) };
            match subevent {
                raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_STARTED => {
                    slots_leaving(&Context::new(ctx), &slots())
                }
                raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_FAILED
                | raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_COMPLETED => {
                    leaving::ended(&slots())
                }
                raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_MODULE_PROPAGATE => {
                    fences::propagate_floor(&Context::new(ctx));
                    crate::glue::requests::rdb::propagate_for_slots(ctx, &slots());
                }
                _ => {}
            }
        }
        slots_changed();
    })
}

/// Valkey 9's atomic slot migration (the source's side: the fence floor
/// and request-ids travel in the snapshot, `aof_rewrite`).
unsafe extern "C" fn on_valkey_slot_migration(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::call((), || {
        // SAFETY: Valkey's info for this event.
        let slots = || unsafe { valkey_slots(data) };
        match subevent {
            VALKEY_EXPORT_STARTED => slots_leaving(&Context::new(ctx), &slots()),
            VALKEY_EXPORT_ABORTED | VALKEY_EXPORT_COMPLETED => leaving::ended(&slots()),
            _ => {}
        }
        slots_changed();
    })
}

/// Slots moved or were trimmed: waiters and far leases are looked at again.
fn slots_changed() {
    waiting::slots_changed();
    keep::slots_changed();
}

/// Slots start to move away: what would post to their mailboxes after the
/// move is settled now (`glue::leaving`).
fn slots_leaving(ctx: &Context, ranges: &[(u16, u16)]) {
    leaving::began(ranges);
    waiting::slots_leaving(ctx);
    keep::slots_leaving(ctx);
}

/// Valkey 9's `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` and the subevents
/// of the source's side (valkeymodule.h; not in the crate's header).
const VALKEY_ATOMIC_SLOT_MIGRATION: u64 = 19;
const VALKEY_EXPORT_STARTED: u64 = 1;
const VALKEY_EXPORT_ABORTED: u64 = 3;
const VALKEY_EXPORT_COMPLETED: u64 = 5;

#[repr(C)]
struct ValkeySlotRange {
    start: c_int,
    end: c_int,
}

#[repr(C)]
struct ValkeyMigrationInfo {
    version: u64,
    job_name: [std::os::raw::c_char; 41],
    slot_ranges: *const ValkeySlotRange,
    num_slot_ranges: u32,
}

/// The slot ranges of a Valkey atomic slot migration event.
///
/// # Safety
/// `data` is that event's `ValkeyModuleAtomicSlotMigrationInfoV1`.
unsafe fn valkey_slots(data: *mut c_void) -> Vec<(u16, u16)> {
    // SAFETY: per the caller, null or the event's info.
    let Some(info) = (unsafe { (data as *const ValkeyMigrationInfo).as_ref() }) else {
        return Vec::new();
    };
    if info.slot_ranges.is_null() {
        return Vec::new();
    }
    // SAFETY: the info holds `num_slot_ranges` ranges there.
    let ranges =
        unsafe { std::slice::from_raw_parts(info.slot_ranges, info.num_slot_ranges as usize) };
    let slot = |s: c_int| u16::try_from(s).unwrap_or(u16::MAX);
    ranges
        .iter()
        .map(|r| (slot(r.start), slot(r.end)))
        .collect()
}

/// The slot ranges a migration event names.
///
/// # Safety
/// `data` is the event's `RedisModuleClusterSlotMigrationInfo`.
unsafe fn moving_slots(data: *mut c_void) -> Vec<(u16, u16)> {
    let info = data as *const raw::RedisModuleClusterSlotMigrationInfo;
    // SAFETY: per the caller, null or the event's info and its ranges.
    let Some(arr) = (unsafe { info.as_ref().and_then(|i| i.slots.as_ref()) }) else {
        return Vec::new();
    };
    let n = usize::try_from(arr.num_ranges).unwrap_or(0);
    // SAFETY: the array holds `num_ranges` ranges.
    unsafe { arr.ranges.as_slice(n) }
        .iter()
        .map(|r| (r.start, r.end))
        .collect()
}

/// `SWAPDB a b`: the keys of both databases moved away from their holds'
/// bindings, which end; what the swap moved is held far away with no
/// binding where it is now (one pass over the keyspace gives such leases
/// their ttl); and every waiter looks at the key its database has now.
unsafe extern "C" fn on_swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    // SAFETY: for this event Redis passes a live RedisModuleSwapDbInfo.
    let dbs = unsafe { (data as *const raw::RedisModuleSwapDbInfo).as_ref() }
        .map(|i| (i.dbnum_first, i.dbnum_second));
    guard::call((), || {
        match dbs {
            Some((a, b)) => keep::swapped(a, b),
            None => keep::thaw_all(),
        }
        timer::note_all();
    });
}

/// `FLUSHDB` / `FLUSHALL` (no per-key callbacks): the waiting engine's
/// waiters and declared waits, and the bindings of every hold flushed.
unsafe extern "C" fn on_flush(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        return;
    }
    // SAFETY: for this event Redis passes a live RedisModuleFlushInfo.
    let db = unsafe { (data as *const raw::RedisModuleFlushInfo).as_ref() }.map_or(-1, |f| f.dbnum);
    waiting::flushed(db);
    guard::call((), || keep::flushed((db != -1).then_some(db)));
}

/// A replica promoted to master may have missed the last grants of the old
/// master: the restart grace starts again, with the same rules.
unsafe extern "C" fn on_role_changed(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard::call((), || {
        if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER {
            config::start_grace(now_ms());
            keep::thaw_all();
        } else {
            // A replica renews nothing: bound leases run out on the new
            // master unless their holders bind them there again.
            keep::clear();
            waiting::demoted();
        }
    })
}
