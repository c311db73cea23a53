//! Leases bound to a connection (`KEEP`), and the far deadline a bound
//! lease is held at.
//!
//! One binding per lease (a key and a holder): binding again moves it to
//! the new connection and ttl. A bound lease needs no renewal (its deadline
//! is far away, everywhere), so nothing here is ever due; a connection that
//! closes drops its bindings through its own index, and nothing scans all
//! leases.

pub mod idle;

use super::hash::{Map, Set};
use std::hash::Hash;
use std::rc::Rc;

/// Where a bound lease's deadline is: `KEPT_BASE + ttl` (a date some
/// 140,000 years away), on the master, its replicas and in its files alike.
/// So a bound lease costs no write while bound, and a server that serves it
/// with no binding (the master once the connection is gone, a promoted
/// replica, a restart, a slot's new owner) reads the ttl back and gives the
/// lease exactly that long from then.
pub const KEPT_BASE: i64 = 1 << 52;

/// The deadline replicas and the AOF hold for a lease bound with `ttl_ms`.
pub fn kept_deadline(ttl_ms: i64) -> i64 {
    KEPT_BASE + ttl_ms.clamp(1, KEPT_BASE - 1)
}

/// The ttl of a deadline held for a bound lease; None for a real deadline
/// (one past every ttl a lease can have is a real one, however far).
pub fn kept_ttl(deadline_ms: i64) -> Option<i64> {
    let ttl = deadline_ms.checked_sub(KEPT_BASE)?;
    (1..=super::settings::MAX_TTL_MS.max)
        .contains(&ttl)
        .then_some(ttl)
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<P> {
    pub client: u64,
    pub ttl_ms: i64,
    pub payload: P,
}

/// A lease names the key it is on. A binding belongs to one hold, and a
/// hold lives in one key: whatever removes or replaces the key (a delete,
/// a flush, a rename or move away, an overwrite, an eviction) ends every
/// binding on it at once, so no later hold of that name is kept by an
/// earlier binding.
pub trait OnKey {
    type Key: Hash + Eq;
    fn on_key(&self) -> Self::Key;
}

#[derive(Debug)]
pub struct Bindings<K: OnKey, P> {
    next: u64,
    /// The lease is kept once, shared by both maps.
    by_id: Map<u64, (Rc<K>, Binding<P>)>,
    by_lease: Map<Rc<K>, u64>,
    by_client: Map<u64, Set<u64>>,
    /// Most keys have one binding: held inline, no set of its own.
    by_key: Map<K::Key, KeyIds>,
}

impl<K: OnKey, P> Default for Bindings<K, P> {
    fn default() -> Self {
        Bindings {
            next: 1,
            by_id: Map::default(),
            by_lease: Map::default(),
            by_client: Map::default(),
            by_key: Map::default(),
        }
    }
}

/// The bindings on one key: one inline (a lock has one holder), a set
/// once a second comes (a semaphore's or readers' holders).
#[derive(Debug, Default)]
enum KeyIds {
    #[default]
    Empty,
    One(u64),
    Many(Set<u64>),
}

impl KeyIds {
    fn insert(&mut self, id: u64) {
        match self {
            KeyIds::Empty => *self = KeyIds::One(id),
            KeyIds::One(x) if *x == id => {}
            KeyIds::One(x) => {
                let first = *x;
                *self = KeyIds::Many([first, id].into_iter().collect());
            }
            KeyIds::Many(set) => {
                set.insert(id);
            }
        }
    }

    fn remove(&mut self, id: u64) {
        match self {
            KeyIds::One(x) if *x == id => *self = KeyIds::Empty,
            KeyIds::Many(set) => {
                set.remove(&id);
            }
            _ => {}
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            KeyIds::Empty => true,
            KeyIds::One(_) => false,
            KeyIds::Many(set) => set.is_empty(),
        }
    }

    fn ids(&self) -> Vec<u64> {
        match self {
            KeyIds::Empty => Vec::new(),
            KeyIds::One(x) => vec![*x],
            KeyIds::Many(set) => set.iter().copied().collect(),
        }
    }
}

/// Removes `id` from the key's entry in `index`, and the entry once empty.
fn forget_on_key<I: Hash + Eq>(index: &mut Map<I, KeyIds>, at: &I, id: u64) {
    if let Some(ids) = index.get_mut(at) {
        ids.remove(id);
        if ids.is_empty() {
            index.remove(at);
        }
    }
}

/// Removes `id` from the set at `at` in `index`, and the set once empty.
fn forget<I: Hash + Eq>(index: &mut Map<I, Set<u64>>, at: &I, id: u64) {
    if let Some(ids) = index.get_mut(at) {
        ids.remove(&id);
        if ids.is_empty() {
            index.remove(at);
        }
    }
}

impl<K: Hash + Eq + OnKey, P> Bindings<K, P> {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn is_bound(&self, lease: &K) -> bool {
        self.by_lease.contains_key(lease)
    }

    /// Binds `lease` to `client`. A lease bound before is moved (the latest
    /// binding wins); returns its binding before.
    pub fn bind(&mut self, lease: K, client: u64, ttl_ms: i64, payload: P) -> Option<Binding<P>> {
        use std::collections::hash_map::Entry;
        let b = Binding {
            client,
            ttl_ms,
            payload,
        };
        // The lease is hashed once: a new binding is the common case.
        let lease = Rc::new(lease);
        let id = match self.by_lease.entry(lease.clone()) {
            Entry::Occupied(o) => {
                // Moved: the same lease and key, maybe another connection.
                let id = *o.get();
                let before = self
                    .by_id
                    .get_mut(&id)
                    .map(|(_, x)| std::mem::replace(x, b))?;
                if before.client != client {
                    forget(&mut self.by_client, &before.client, id);
                    self.by_client.entry(client).or_default().insert(id);
                }
                return Some(before);
            }
            Entry::Vacant(v) => *v.insert(self.next),
        };
        self.next += 1;
        self.by_key.entry(lease.on_key()).or_default().insert(id);
        self.by_client.entry(client).or_default().insert(id);
        self.by_id.insert(id, (lease, b));
        None
    }

    /// Ends the binding of `lease` (its last hold was released).
    pub fn unbind(&mut self, lease: &K) -> Option<Binding<P>> {
        let id = self.by_lease.get(lease).copied()?;
        let (lease, b) = self.by_id.remove(&id)?;
        self.by_lease.remove(&lease);
        forget(&mut self.by_client, &b.client, id);
        forget_on_key(&mut self.by_key, &lease.on_key(), id);
        Some(b)
    }

    /// The connection closed (or went silent): its bindings end. Returns
    /// them.
    pub fn drop_client(&mut self, client: u64) -> Vec<(Rc<K>, Binding<P>)> {
        let ids = self.by_client.remove(&client).unwrap_or_default();
        let mut ended = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some((lease, b)) = self.by_id.remove(id) {
                self.by_lease.remove(&lease);
                forget_on_key(&mut self.by_key, &lease.on_key(), *id);
                ended.push((lease, b));
            }
        }
        ended
    }

    /// The key went (deleted, replaced, moved away): every binding on it
    /// ends; its holds are gone, so nothing is written for them. Returns
    /// the bindings that ended (whose owners may want to hear of it).
    pub fn drop_key(&mut self, key: &K::Key) -> Vec<Binding<P>> {
        self.take_key(key).into_iter().map(|(_, b)| b).collect()
    }

    /// Every binding on `key` ends, its leases returned with it: they stay,
    /// and their owner writes each its ttl (a key leaving the node).
    pub fn take_key(&mut self, key: &K::Key) -> Vec<(Rc<K>, Binding<P>)> {
        let ids = self.by_key.remove(key).unwrap_or_default().ids();
        let mut ended = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some((lease, b)) = self.by_id.remove(id) {
                self.by_lease.remove(&lease);
                forget(&mut self.by_client, &b.client, *id);
                ended.push((lease, b));
            }
        }
        ended
    }

    /// The keys for which `pick` holds, among those with bindings.
    pub fn keys_where(&self, mut pick: impl FnMut(&K::Key) -> bool) -> Vec<K::Key> {
        self.by_id
            .values()
            .map(|(lease, _)| lease.on_key())
            .filter(|k| pick(k))
            .collect()
    }

    /// Every key for which `gone` holds went at once (a flush, a swap of
    /// databases): as `drop_key` for each. O(bindings), like the flush.
    pub fn drop_keys(&mut self, gone: impl FnMut(&K::Key) -> bool) -> Vec<Binding<P>> {
        let keys = self.keys_where(gone);
        keys.iter().flat_map(|k| self.drop_key(k)).collect()
    }

    /// The leases bound on `key`.
    pub fn on(&self, key: &K::Key) -> Vec<Rc<K>> {
        self.by_key.get(key).map_or_else(Vec::new, |ids| {
            ids.ids()
                .iter()
                .filter_map(|id| self.by_id.get(id).map(|(l, _)| l.clone()))
                .collect()
        })
    }

    /// The binding of `lease`, if it is bound.
    pub fn binding(&self, lease: &K) -> Option<&Binding<P>> {
        let id = self.by_lease.get(lease)?;
        self.by_id.get(id).map(|(_, b)| b)
    }

    /// Whether `client` holds any binding.
    pub fn has_client(&self, client: u64) -> bool {
        self.by_client.contains_key(&client)
    }

    /// The connections that hold bindings.
    pub fn clients(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_client.keys().copied()
    }

    pub fn clear(&mut self) {
        *self = Bindings {
            next: self.next,
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests;
