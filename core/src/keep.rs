//! Leases bound to a connection (`KEEP`): who renews what, and when.
//!
//! One binding per lease (a key and a holder): binding again moves it to
//! the new connection and ttl. Renewals come from one ordered index of
//! next-renewal times, so the timer only ever looks at what is due, and
//! a connection that closes drops its bindings through its own index:
//! nothing here scans all leases. The glue keeps one of these, renews what
//! `due` names through the kind of each lease, and reports back.

use super::hash::{Map, Set};
use std::collections::BTreeSet;
use std::hash::Hash;
use std::rc::Rc;

/// Where a bound lease's deadline is far: replicas and the AOF hold a bound
/// lease as `KEPT_BASE + ttl` (a date some 140,000 years away), so that no
/// renewal needs to reach them while the lease is bound, and a server that
/// takes over from them (a promoted replica, a restart from the AOF) reads
/// the ttl back and gives the lease exactly that long from when it starts
/// serving. The master keeps the real deadline and renews it locally.
pub const KEPT_BASE: i64 = 1 << 52;

/// The deadline replicas and the AOF hold for a lease bound with `ttl_ms`.
pub fn kept_deadline(ttl_ms: i64) -> i64 {
    KEPT_BASE + ttl_ms.clamp(1, KEPT_BASE - 1)
}

/// The ttl of a deadline held for a bound lease; None for a real deadline.
pub fn kept_ttl(deadline_ms: i64) -> Option<i64> {
    (deadline_ms > KEPT_BASE).then(|| deadline_ms - KEPT_BASE)
}

/// Milliseconds a lease has left as `*.INFO` shows them: a bound lease
/// held far away shows its ttl (what it would have once its master is
/// gone).
pub fn ttl_left(deadline_ms: i64, now_ms: i64) -> i64 {
    kept_ttl(deadline_ms).unwrap_or_else(|| deadline_ms.saturating_sub(now_ms).max(0))
}

/// The holders among `holders` (name, deadline) whose lease is held far
/// away, with their ttl.
pub fn kept_of<'a>(holders: impl Iterator<Item = (&'a [u8], i64)>) -> Vec<(Vec<u8>, i64)> {
    holders
        .filter_map(|(h, d)| kept_ttl(d).map(|t| (h.to_vec(), t)))
        .collect()
}

/// A lease is renewed once a third of its ttl has passed: two thirds of it
/// are left for the renewal to happen, even on a busy or paused server.
pub fn interval(ttl_ms: i64) -> i64 {
    (ttl_ms / 3).max(1)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<P> {
    pub client: u64,
    pub ttl_ms: i64,
    pub renew_at: i64,
    pub payload: P,
}

#[derive(Debug)]
pub struct Bindings<K, P> {
    next: u64,
    /// The lease is kept once, shared by both maps.
    by_id: Map<u64, (Rc<K>, Binding<P>)>,
    by_lease: Map<Rc<K>, u64>,
    by_client: Map<u64, Set<u64>>,
    due: BTreeSet<(i64, u64)>,
}

impl<K, P> Default for Bindings<K, P> {
    fn default() -> Self {
        Bindings {
            next: 1,
            by_id: Map::default(),
            by_lease: Map::default(),
            by_client: Map::default(),
            due: BTreeSet::new(),
        }
    }
}

impl<K: Hash + Eq, P> Bindings<K, P> {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn is_bound(&self, lease: &K) -> bool {
        self.by_lease.contains_key(lease)
    }

    /// Binds `lease` to `client`, first renewal one interval from `now`.
    /// A lease bound before is moved (the latest binding wins).
    pub fn bind(&mut self, lease: K, client: u64, ttl_ms: i64, now_ms: i64, payload: P) -> u64 {
        self.unbind(&lease);
        let id = self.next;
        self.next += 1;
        let renew_at = now_ms.saturating_add(interval(ttl_ms));
        let lease = Rc::new(lease);
        self.by_lease.insert(lease.clone(), id);
        self.by_client.entry(client).or_default().insert(id);
        self.due.insert((renew_at, id));
        let b = Binding {
            client,
            ttl_ms,
            renew_at,
            payload,
        };
        self.by_id.insert(id, (lease, b));
        id
    }

    /// Ends the binding of `lease` (its last hold was released).
    pub fn unbind(&mut self, lease: &K) -> Option<Binding<P>> {
        let id = self.by_lease.get(lease).copied()?;
        self.remove(id).map(|(_, b)| b)
    }

    pub fn remove(&mut self, id: u64) -> Option<(Rc<K>, Binding<P>)> {
        let (lease, b) = self.by_id.remove(&id)?;
        self.by_lease.remove(&lease);
        self.due.remove(&(b.renew_at, id));
        if let Some(ids) = self.by_client.get_mut(&b.client) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_client.remove(&b.client);
            }
        }
        Some((lease, b))
    }

    /// The connection closed: its leases are renewed no more. Returns the
    /// bindings that ended.
    pub fn drop_client(&mut self, client: u64) -> Vec<(Rc<K>, Binding<P>)> {
        let ids = self.by_client.remove(&client).unwrap_or_default();
        let mut ended = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some((lease, b)) = self.by_id.remove(id) {
                self.by_lease.remove(&lease);
                self.due.remove(&(b.renew_at, *id));
                ended.push((lease, b));
            }
        }
        ended
    }

    /// The binding of `lease`, if it is bound.
    pub fn binding(&self, lease: &K) -> Option<&Binding<P>> {
        let id = self.by_lease.get(lease)?;
        self.by_id.get(id).map(|(_, b)| b)
    }

    /// Every binding, in no particular order.
    pub fn all(&self) -> impl Iterator<Item = &(Rc<K>, Binding<P>)> {
        self.by_id.values()
    }

    pub fn clear(&mut self) {
        *self = Bindings {
            next: self.next,
            ..Default::default()
        };
    }

    /// Up to `max` bindings due by `now`, earliest first.
    pub fn due(&self, now_ms: i64, max: usize) -> Vec<u64> {
        self.due
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .take(max)
            .map(|(_, id)| *id)
            .collect()
    }

    pub fn get(&self, id: u64) -> Option<&(Rc<K>, Binding<P>)> {
        self.by_id.get(&id)
    }

    /// The lease was renewed at `now`: next renewal one interval later.
    pub fn renewed(&mut self, id: u64, now_ms: i64) {
        if let Some((_, b)) = self.by_id.get_mut(&id) {
            self.due.remove(&(b.renew_at, id));
            b.renew_at = now_ms.saturating_add(interval(b.ttl_ms));
            self.due.insert((b.renew_at, id));
        }
    }

    /// Puts a renewal off (writes are paused): due again at `at`.
    pub fn postpone(&mut self, id: u64, at: i64) {
        if let Some((_, b)) = self.by_id.get_mut(&id) {
            self.due.remove(&(b.renew_at, id));
            b.renew_at = at;
            self.due.insert((at, id));
        }
    }

    pub fn next_due(&self) -> Option<i64> {
        self.due.first().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests;
