//! The server-wide counters behind `INFO padlock`; each kind's own gauge and
//! counters are in its `KindInfo` (`types`). The section itself is written
//! by `report`, which also asks the waiting engine for its gauges.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Held values (of any kind) removed by eviction.
pub static EVICTED_HELD: AtomicU64 = AtomicU64::new(0);
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
/// Queued requests taken back with `LOCK.CANCEL`.
pub static CANCELLED: AtomicU64 = AtomicU64::new(0);

pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn gauge(g: &AtomicI64, delta: i64) {
    g.fetch_add(delta, Ordering::Relaxed);
}
