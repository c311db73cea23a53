//! The blocking engine's bookkeeping as plain data: the per-key FIFO queues
//! (`Queues`), which blocked-client handle is which waiter, when each
//! `BLOCK` timeout comes, and, per key with waiters, when its lease may next
//! free it (`watch`). The glue keeps one of these and asks it what is due;
//! keeping the indexes in step with each other is this module's job alone.

use super::hash::{Map, Set};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;

use super::queue::{Queues, WaiterId};

#[derive(Debug)]
pub struct Entry<W> {
    /// The blocked client's handle (an opaque id for the glue).
    pub handle: usize,
    /// When `BLOCK timeout-ms` runs out; None waits forever.
    pub timeout_at: Option<i64>,
    pub payload: W,
}

#[derive(Debug)]
pub struct Waiters<K, W> {
    queues: Queues<K, Entry<W>>,
    by_handle: Map<usize, WaiterId>,
    timeouts: BTreeSet<(i64, WaiterId)>,
    /// Per watched key its moment (and a sequence number, unique), and the
    /// keys in that order: the timer reads what is due and the next moment
    /// without looking at every key with waiters.
    watch: Map<K, (i64, u64)>,
    watch_order: BTreeMap<(i64, u64), K>,
    seq: u64,
}

impl<K: Hash + Eq + Clone, W> Default for Waiters<K, W> {
    fn default() -> Self {
        Waiters {
            queues: Queues::default(),
            by_handle: Map::default(),
            timeouts: BTreeSet::new(),
            watch: Map::default(),
            watch_order: BTreeMap::new(),
            seq: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, W> Waiters<K, W> {
    /// Queues a waiter on `keys`, behind everyone already there.
    pub fn push(&mut self, keys: Vec<K>, entry: Entry<W>) -> WaiterId {
        let (handle, timeout_at) = (entry.handle, entry.timeout_at);
        let id = self.queues.push(keys, entry);
        self.by_handle.insert(handle, id);
        if let Some(t) = timeout_at {
            self.timeouts.insert((t, id));
        }
        id
    }

    /// Queues a one-key waiter ahead of everyone on that key.
    pub fn push_front(&mut self, key: K, entry: Entry<W>) -> WaiterId {
        let (handle, timeout_at) = (entry.handle, entry.timeout_at);
        let id = self.queues.push_front(key, entry);
        self.by_handle.insert(handle, id);
        if let Some(t) = timeout_at {
            self.timeouts.insert((t, id));
        }
        id
    }

    /// The waiters on `key` queued before id `before`, nearest first.
    pub fn ahead(&self, key: &K, before: WaiterId) -> impl Iterator<Item = WaiterId> + '_ {
        self.queues.ahead(key, before)
    }

    /// The waiters on `key` in serving order.
    pub fn queue(&self, key: &K) -> impl Iterator<Item = (WaiterId, &Entry<W>)> + '_ {
        self.queues
            .queue(key)
            .filter_map(move |id| self.queues.get(id).map(|(_, e)| (id, e)))
    }

    /// Every key with waiters, with how many wait there.
    pub fn keys(&self) -> impl Iterator<Item = (&K, usize)> + '_ {
        self.queues.keys().map(move |k| (k, self.queues.len(k)))
    }

    /// Takes a waiter out of every index.
    pub fn take(&mut self, id: WaiterId) -> Option<(Vec<K>, Entry<W>)> {
        let (keys, e) = self.queues.remove(id)?;
        self.by_handle.remove(&e.handle);
        if let Some(t) = e.timeout_at {
            self.timeouts.remove(&(t, id));
        }
        for k in &keys {
            if !self.queues.has_waiters(k) {
                self.unwatch(k);
            }
        }
        Some((keys, e))
    }

    /// Hands a waiter's place in its queues to another blocked client (a
    /// resend of the same request): its handle and timeout change, its
    /// place does not. Returns the entry, to swap the rest of its payload.
    pub fn hand_over(
        &mut self,
        id: WaiterId,
        handle: usize,
        timeout_at: Option<i64>,
    ) -> Option<&mut Entry<W>> {
        let e = self.queues.get_mut(id)?;
        self.by_handle.remove(&e.handle);
        if let Some(t) = e.timeout_at {
            self.timeouts.remove(&(t, id));
        }
        e.handle = handle;
        e.timeout_at = timeout_at;
        self.by_handle.insert(handle, id);
        if let Some(t) = timeout_at {
            self.timeouts.insert((t, id));
        }
        Some(e)
    }

    /// Every waiter, in no particular order.
    pub fn ids(&self) -> Vec<WaiterId> {
        self.by_handle.values().copied().collect()
    }

    pub fn by_handle(&self, handle: usize) -> Option<WaiterId> {
        self.by_handle.get(&handle).copied()
    }

    pub fn get(&self, id: WaiterId) -> Option<&(Vec<K>, Entry<W>)> {
        self.queues.get(id)
    }

    pub fn head(&self, key: &K) -> Option<WaiterId> {
        self.queues.head(key)
    }

    /// First in the queue of every key it waits for: may be granted.
    pub fn ready(&self, id: WaiterId) -> bool {
        self.queues.at_front_everywhere(id)
    }

    pub fn has_waiters(&self, key: &K) -> bool {
        self.queues.has_waiters(key)
    }

    pub fn len(&self, key: &K) -> usize {
        self.queues.len(key)
    }

    pub fn waiting(&self) -> usize {
        self.queues.waiting()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Waiters whose timeout has come, earliest first.
    pub fn timed_out(&self, now_ms: i64) -> Vec<WaiterId> {
        self.timeouts
            .iter()
            .take_while(|(t, _)| *t <= now_ms)
            .map(|(_, id)| *id)
            .collect()
    }

    /// When `key` may next free itself (None: not by itself). Only keys
    /// with waiters are watched.
    pub fn watch(&mut self, key: &K, at: Option<i64>) {
        let Some(t) = at.filter(|_| self.queues.has_waiters(key)) else {
            return self.unwatch(key);
        };
        // A new waiter on a hot key asks again with the same moment.
        if self.watch.get(key).is_some_and(|(old, _)| *old == t) {
            return;
        }
        self.unwatch(key);
        self.seq += 1;
        self.watch.insert(key.clone(), (t, self.seq));
        self.watch_order.insert((t, self.seq), key.clone());
    }

    fn unwatch(&mut self, key: &K) {
        if let Some(at) = self.watch.remove(key) {
            self.watch_order.remove(&at);
        }
    }

    /// Keys with waiters that are due for another look: the `noted` ones
    /// that have waiters, and those whose watched moment has come. Costs
    /// what is due, not every key with waiters.
    pub fn due_keys(&self, now_ms: i64, noted: impl IntoIterator<Item = K>) -> Vec<K> {
        let noted: Set<K> = noted
            .into_iter()
            .filter(|k| self.queues.has_waiters(k))
            .collect();
        let mut out: Vec<K> = self
            .watch_order
            .range(..=(now_ms, u64::MAX))
            .map(|(_, k)| k)
            .filter(|k| !noted.contains(*k))
            .cloned()
            .collect();
        out.extend(noted);
        out
    }

    /// Every key with waiters (after a flush: all need a look).
    pub fn all_keys(&self) -> Vec<K> {
        self.queues.keys().cloned().collect()
    }

    /// The next moment something is due: a watched lease or a timeout.
    pub fn next_event(&self) -> Option<i64> {
        let lease = self.watch_order.first_key_value().map(|((t, _), _)| *t);
        let timeout = self.timeouts.first().map(|(t, _)| *t);
        lease.into_iter().chain(timeout).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The same bookkeeping, the naive way: a list of live waiters.
    #[derive(Default)]
    struct Model {
        live: Vec<(WaiterId, Vec<u8>, usize, Option<i64>)>,
        watch: Map<u8, i64>,
    }

    impl Model {
        fn head(&self, k: u8) -> Option<WaiterId> {
            self.live
                .iter()
                .filter(|w| w.1.contains(&k))
                .map(|w| w.0)
                .min()
        }
    }

    #[test]
    fn hand_over_keeps_the_place_and_swaps_handle_and_timeout() {
        let mut w: Waiters<u8, ()> = Waiters::default();
        let a = w.push(
            vec![1],
            Entry {
                handle: 10,
                timeout_at: Some(5),
                payload: (),
            },
        );
        let b = w.push(
            vec![1],
            Entry {
                handle: 11,
                timeout_at: None,
                payload: (),
            },
        );
        assert!(w.hand_over(a, 12, Some(50)).is_some());
        assert_eq!(w.head(&1), Some(a));
        assert_eq!(w.by_handle(10), None);
        assert_eq!(w.by_handle(12), Some(a));
        assert!(w.timed_out(10).is_empty());
        assert_eq!(w.timed_out(50), vec![a]);
        assert!(w.take(a).is_some());
        assert_eq!(w.head(&1), Some(b));
        assert!(w.hand_over(a, 13, None).is_none());
    }

    proptest! {
        #[test]
        fn matches_model(ops in proptest::collection::vec((0u8..5, 0u8..4, 0u8..4, 0i64..100), 1..150)) {
            let mut w: Waiters<u8, ()> = Waiters::default();
            let mut m = Model::default();
            let mut next_handle = 0;
            let mut now = 0;
            for (op, a, b, t) in ops {
                match op {
                    0 => {
                        let keys = if a == b { vec![a] } else { vec![a, b] };
                        next_handle += 1;
                        let timeout = (t % 3 != 0).then_some(now + t);
                        let id = w.push(keys.clone(), Entry { handle: next_handle, timeout_at: timeout, payload: () });
                        m.live.push((id, keys, next_handle, timeout));
                    }
                    1 if !m.live.is_empty() => {
                        // By handle, as a disconnect does.
                        let (_, _, h, _) = m.live.remove(a as usize % m.live.len());
                        let id = w.by_handle(h).unwrap();
                        prop_assert!(w.take(id).is_some());
                        prop_assert!(w.by_handle(h).is_none());
                    }
                    2 => {
                        now += t;
                        let due = w.timed_out(now);
                        let mut want: Vec<_> = m.live.iter().filter(|x| x.3.is_some_and(|d| d <= now)).map(|x| x.0).collect();
                        want.sort_by_key(|id| (m.live.iter().find(|x| x.0 == *id).unwrap().3, *id));
                        prop_assert_eq!(&due, &want);
                        for id in due {
                            w.take(id);
                            m.live.retain(|x| x.0 != id);
                        }
                    }
                    3 => {
                        let at = (t % 4 != 0).then_some(now + t);
                        w.watch(&a, at);
                        match at {
                            Some(at) if m.head(a).is_some() => { m.watch.insert(a, at); }
                            _ => { m.watch.remove(&a); }
                        }
                    }
                    _ => {
                        let due = w.due_keys(now, [b, b]);
                        for k in 0u8..4 {
                            let want = m.head(k).is_some() && (k == b || m.watch.get(&k).is_some_and(|at| *at <= now));
                            prop_assert_eq!(due.contains(&k), want);
                            prop_assert!(due.iter().filter(|x| **x == k).count() <= 1, "each key once");
                        }
                        let mut all = w.all_keys();
                        all.sort();
                        let want: Vec<u8> = (0u8..4).filter(|k| m.head(*k).is_some()).collect();
                        prop_assert_eq!(all, want);
                    }
                }
                m.watch.retain(|k, _| m.live.iter().any(|x| x.1.contains(k)));
                for k in 0u8..4 {
                    prop_assert_eq!(w.head(&k), m.head(k));
                    prop_assert_eq!(w.len(&k), m.live.iter().filter(|x| x.1.contains(&k)).count());
                }
                for x in &m.live {
                    let front = x.1.iter().all(|k| m.head(*k) == Some(x.0));
                    prop_assert_eq!(w.ready(x.0), front);
                }
                let next = m.watch.values().copied().chain(m.live.iter().filter_map(|x| x.3)).min();
                prop_assert_eq!(w.next_event(), next);
                prop_assert_eq!(w.waiting(), m.live.len());
            }
        }
    }
}
