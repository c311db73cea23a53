//! The counters and gauges behind `INFO padlock` (the section itself is
//! written by `report`, which also asks the waiting engine for its gauges).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

pub static ACQUIRED: AtomicU64 = AtomicU64::new(0);
pub static REENTERED: AtomicU64 = AtomicU64::new(0);
pub static RELEASED: AtomicU64 = AtomicU64::new(0);
pub static EXTENDED: AtomicU64 = AtomicU64::new(0);
pub static CONTENDED: AtomicU64 = AtomicU64::new(0);
/// Whole keys that ran out, per kind.
pub static EXPIRED: AtomicU64 = AtomicU64::new(0);
pub static SEM_EXPIRED: AtomicU64 = AtomicU64::new(0);
pub static RW_EXPIRED: AtomicU64 = AtomicU64::new(0);
/// Held values (of any kind) removed by eviction.
pub static EVICTED_HELD: AtomicU64 = AtomicU64::new(0);
pub static SEM_ACQUIRED: AtomicU64 = AtomicU64::new(0);
pub static SEM_RELEASED: AtomicU64 = AtomicU64::new(0);
pub static SEM_EXTENDED: AtomicU64 = AtomicU64::new(0);
pub static SEM_CONTENDED: AtomicU64 = AtomicU64::new(0);
pub static SEM_EXPIRED_HOLDERS: AtomicU64 = AtomicU64::new(0);
pub static RW_ACQUIRED: AtomicU64 = AtomicU64::new(0);
pub static RW_RELEASED: AtomicU64 = AtomicU64::new(0);
pub static RW_EXTENDED: AtomicU64 = AtomicU64::new(0);
pub static RW_CONTENDED: AtomicU64 = AtomicU64::new(0);
pub static RW_EXPIRED_HOLDERS: AtomicU64 = AtomicU64::new(0);
pub static KEEP_RENEWALS: AtomicU64 = AtomicU64::new(0);
pub static KEEP_LOST: AtomicU64 = AtomicU64::new(0);
pub static DEADLOCKS: AtomicU64 = AtomicU64::new(0);
/// Deadlock checks that met more of the graph than their budget.
pub static DEADLOCK_CHECKS_TOO_BIG: AtomicU64 = AtomicU64::new(0);
pub static TIMEOUTS: AtomicU64 = AtomicU64::new(0);
pub static HANDOFFS: AtomicU64 = AtomicU64::new(0);
/// Waiters answered with a redirect or `UNBLOCKED`, ungranted: their key's
/// slot moved, or this master became a replica.
pub static TURNED_AWAY: AtomicU64 = AtomicU64::new(0);

/// Values alive in memory (created minus freed), all databases.
pub static LOCKS: AtomicI64 = AtomicI64::new(0);
pub static SEMAPHORES: AtomicI64 = AtomicI64::new(0);
pub static RWLOCKS: AtomicI64 = AtomicI64::new(0);

pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn gauge(g: &AtomicI64, delta: i64) {
    g.fetch_add(delta, Ordering::Relaxed);
}
