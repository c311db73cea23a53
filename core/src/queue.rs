//! FIFO wait queues, one per key, under one global arrival order.
//!
//! Every waiter gets an id from one increasing counter, and each key's queue
//! is ordered by id. So a waiter that needs several keys is behind the same
//! earlier waiters on every one of them: two waiters can never wait for each
//! other through the queues. A waiter may be granted only when it is first
//! in the queue of every key it needs (`at_front_everywhere`).

use super::hash::Map;
use std::collections::BTreeSet;
use std::hash::Hash;

pub type WaiterId = u64;

/// Ids of ordinary waiters count up from here; waiters let in at the front
/// (`push_front`) count down from just below it, so each key's queue stays
/// ordered by id.
pub const FRONT: WaiterId = 1 << 40;

#[derive(Debug)]
pub struct Queues<K, T> {
    next: WaiterId,
    front: WaiterId,
    by_key: Map<K, BTreeSet<WaiterId>>,
    /// By id only (the order lives in `by_key`): a hash map, since a
    /// waiter's payload is large and a tree moves it on every insert.
    waiters: Map<WaiterId, (Vec<K>, T)>,
}

impl<K: Hash + Eq + Clone, T> Default for Queues<K, T> {
    fn default() -> Self {
        Queues {
            next: FRONT,
            front: FRONT - 1,
            by_key: Map::default(),
            waiters: Map::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, T> Queues<K, T> {
    /// Queues a waiter behind everyone already waiting on any of `keys`.
    pub fn push(&mut self, keys: Vec<K>, payload: T) -> WaiterId {
        let id = self.next;
        self.next += 1;
        for k in &keys {
            self.by_key.entry(k.clone()).or_default().insert(id);
        }
        self.waiters.insert(id, (keys, payload));
        id
    }

    /// Queues a one-key waiter ahead of everyone waiting there (a holder
    /// upgrading its own hold, which those behind wait for anyway). Being
    /// on one key only, it cannot break the global order of multi-key
    /// waiters.
    pub fn push_front(&mut self, key: K, payload: T) -> WaiterId {
        let id = self.front;
        self.front -= 1;
        self.by_key.entry(key.clone()).or_default().insert(id);
        self.waiters.insert(id, (vec![key], payload));
        id
    }

    /// The waiters on `key`, first in line first.
    pub fn queue(&self, key: &K) -> impl Iterator<Item = WaiterId> + '_ {
        self.by_key.get(key).into_iter().flatten().copied()
    }

    /// The waiters on `key` queued before id `before`, nearest first.
    pub fn ahead(&self, key: &K, before: WaiterId) -> impl Iterator<Item = WaiterId> + '_ {
        self.by_key
            .get(key)
            .into_iter()
            .flat_map(move |q| q.range(..before).rev().copied())
    }

    /// Takes a waiter out of every queue it is in.
    pub fn remove(&mut self, id: WaiterId) -> Option<(Vec<K>, T)> {
        let (keys, payload) = self.waiters.remove(&id)?;
        // Given back once mostly empty (a burst of waiters gone), at a cost
        // spread over the removals that emptied it.
        if self.waiters.capacity() > 64 && self.waiters.len() * 4 < self.waiters.capacity() {
            self.waiters.shrink_to(self.waiters.len() * 2);
        }
        for k in &keys {
            if let Some(q) = self.by_key.get_mut(k) {
                q.remove(&id);
                if q.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        Some((keys, payload))
    }

    pub fn get(&self, id: WaiterId) -> Option<&(Vec<K>, T)> {
        self.waiters.get(&id)
    }

    pub fn get_mut(&mut self, id: WaiterId) -> Option<&mut T> {
        self.waiters.get_mut(&id).map(|(_, t)| t)
    }

    pub fn head(&self, key: &K) -> Option<WaiterId> {
        self.by_key.get(key).and_then(|q| q.first().copied())
    }

    /// Number of waiters queued on `key`.
    pub fn len(&self, key: &K) -> usize {
        self.by_key.get(key).map_or(0, BTreeSet::len)
    }

    pub fn has_waiters(&self, key: &K) -> bool {
        self.by_key.contains_key(key)
    }

    /// Waiters in all queues.
    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// True when `id` is first in the queue of every key it waits on.
    pub fn at_front_everywhere(&self, id: WaiterId) -> bool {
        self.waiters
            .get(&id)
            .is_some_and(|(keys, _)| keys.iter().all(|k| self.head(k) == Some(id)))
    }

    /// Keys that have waiters.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.by_key.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fifo_per_key() {
        let mut q: Queues<&str, ()> = Queues::default();
        let a = q.push(vec!["k"], ());
        let b = q.push(vec!["k"], ());
        let c = q.push(vec!["k"], ());
        assert_eq!(q.head(&"k"), Some(a));
        q.remove(a);
        assert_eq!(q.head(&"k"), Some(b));
        q.remove(c);
        assert_eq!(q.len(&"k"), 1);
        q.remove(b);
        assert!(!q.has_waiters(&"k") && q.is_empty());
    }

    #[test]
    fn front_goes_ahead() {
        let mut q: Queues<&str, ()> = Queues::default();
        let a = q.push(vec!["k"], ());
        let up = q.push_front("k", ());
        assert_eq!(q.head(&"k"), Some(up));
        assert_eq!(q.queue(&"k").collect::<Vec<_>>(), vec![up, a]);
        let b = q.push(vec!["k"], ());
        assert_eq!(
            q.ahead(&"k", b).collect::<Vec<_>>(),
            vec![a, up],
            "nearest first"
        );
        assert_eq!(
            q.ahead(&"k", FRONT).collect::<Vec<_>>(),
            vec![up],
            "the front only"
        );
        q.remove(up);
        assert_eq!(q.head(&"k"), Some(a));
    }

    #[test]
    fn multi_key_waiter_must_be_first_everywhere() {
        let mut q: Queues<&str, ()> = Queues::default();
        let early = q.push(vec!["b"], ());
        let multi = q.push(vec!["a", "b"], ());
        let late = q.push(vec!["a"], ());
        assert!(!q.at_front_everywhere(multi), "behind `early` on b");
        assert!(q.at_front_everywhere(early));
        assert!(!q.at_front_everywhere(late), "no overtaking on a");
        q.remove(early);
        assert!(q.at_front_everywhere(multi));
    }

    proptest! {
        /// Whatever is pushed and removed, the head of each key is the
        /// oldest waiter still waiting on it.
        #[test]
        fn head_is_oldest(ops in proptest::collection::vec((any::<bool>(), 0u8..4, 0u8..4, 0usize..20), 1..200)) {
            let mut q: Queues<u8, ()> = Queues::default();
            let mut live: Vec<(WaiterId, Vec<u8>)> = vec![];
            for (push, k1, k2, pick) in ops {
                if push || live.is_empty() {
                    let keys = if k1 == k2 { vec![k1] } else { vec![k1, k2] };
                    live.push((q.push(keys.clone(), ()), keys));
                } else {
                    let (id, _) = live.remove(pick % live.len());
                    prop_assert!(q.remove(id).is_some());
                }
                for k in 0u8..4 {
                    let oldest = live.iter().filter(|(_, ks)| ks.contains(&k)).map(|(id, _)| *id).min();
                    prop_assert_eq!(q.head(&k), oldest);
                }
            }
        }
    }
}
