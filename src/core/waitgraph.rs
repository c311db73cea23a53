//! The wait-for graph and its deadlock check.
//!
//! Edges go from a holder to a key it waits for: one per client blocked with
//! `BLOCK`, and one per holder declared with `LOCK.WAITFOR`. A key leads to
//! its holder(s), which the caller supplies at check time (`Held`), so the
//! graph never duplicates lock state.
//!
//! Waiting for a lock is an AND-wait on its one holder; waiting for a
//! semaphore is an OR-wait: any holder that finishes frees permits. So a
//! would-be waiter W is deadlocked when the key it wants is *stuck on W*:
//!
//! - a holder is stuck on W if it is W, or it waits for a key stuck on W;
//! - a lock key is stuck on W if its holder is;
//! - a semaphore key is stuck on W if it has holders and *every* one is.
//!
//! That is a least fixed point, computed over the part of the graph reachable
//! from the wanted key only (cost grows with the edges reachable, never with
//! all keys), and the cycle is read back along the order in which nodes
//! became stuck.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// Who holds a key right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Free,
    Lock(Vec<u8>),
    Sem(Vec<Vec<u8>>),
}

/// Why an edge exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `LOCK.WAITFOR`: at most one per holder.
    Declared,
    /// A client blocked with `BLOCK`, by waiter id.
    Blocked(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge<K> {
    pub key: K,
    pub source: Source,
    /// Absolute unix ms; None waits forever.
    pub expires_at: Option<i64>,
}

impl<K> Edge<K> {
    fn live(&self, now_ms: i64) -> bool {
        self.expires_at.is_none_or(|t| t > now_ms)
    }
}

/// One step of a reported cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node<K> {
    Holder(Vec<u8>),
    Key(K),
}

#[derive(Debug)]
pub struct WaitGraph<K> {
    edges: HashMap<Vec<u8>, Vec<Edge<K>>>,
}

impl<K> Default for WaitGraph<K> {
    fn default() -> Self {
        WaitGraph {
            edges: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> WaitGraph<K> {
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    fn add(&mut self, holder: &[u8], edge: Edge<K>) {
        self.edges.entry(holder.to_vec()).or_default().push(edge);
    }

    fn remove_where(&mut self, holder: &[u8], pred: impl Fn(&Edge<K>) -> bool) {
        if let Some(list) = self.edges.get_mut(holder) {
            list.retain(|e| !pred(e));
            if list.is_empty() {
                self.edges.remove(holder);
            }
        }
    }

    /// `LOCK.WAITFOR`: replaces the holder's declared edge.
    pub fn declare(&mut self, holder: &[u8], key: K, expires_at: i64) {
        self.remove_where(holder, |e| e.source == Source::Declared);
        self.add(
            holder,
            Edge {
                key,
                source: Source::Declared,
                expires_at: Some(expires_at),
            },
        );
    }

    pub fn add_blocked(&mut self, holder: &[u8], key: K, waiter: u64, expires_at: Option<i64>) {
        self.add(
            holder,
            Edge {
                key,
                source: Source::Blocked(waiter),
                expires_at,
            },
        );
    }

    pub fn remove_blocked(&mut self, holder: &[u8], waiter: u64) {
        self.remove_where(holder, |e| e.source == Source::Blocked(waiter));
    }

    /// The holder got `key`: it no longer waits for it.
    pub fn acquired(&mut self, holder: &[u8], key: &K) {
        self.remove_where(holder, |e| e.source == Source::Declared && &e.key == key);
    }

    /// Drops edges whose time ran out.
    pub fn prune(&mut self, now_ms: i64) {
        self.edges.retain(|_, list| {
            list.retain(|e| e.live(now_ms));
            !list.is_empty()
        });
    }

    pub fn len(&self, now_ms: i64) -> usize {
        self.edges
            .values()
            .map(|l| l.iter().filter(|e| e.live(now_ms)).count())
            .sum()
    }

    /// Live edges, holder by holder.
    pub fn edges(&self, now_ms: i64) -> Vec<(&[u8], &Edge<K>)> {
        let mut out: Vec<_> = self
            .edges
            .iter()
            .flat_map(|(h, l)| l.iter().map(move |e| (h.as_slice(), e)))
            .filter(|(_, e)| e.live(now_ms))
            .collect();
        out.sort_by_key(|(h, e)| (h.to_vec(), e.expires_at));
        out
    }

    /// Would `waiter` waiting for `key` close a cycle? If so, the cycle:
    /// waiter, key, holder, key, ..., waiter.
    pub fn cycle_if_waits(
        &self,
        waiter: &[u8],
        key: &K,
        now_ms: i64,
        mut held: impl FnMut(&K) -> Held,
    ) -> Option<Vec<Node<K>>> {
        // 1. What is reachable from `key`: keys with their holders, holders
        //    with their live edges.
        let mut keys: HashMap<K, Held> = HashMap::new();
        let mut holders: HashSet<Vec<u8>> = HashSet::new();
        let mut todo = vec![key.clone()];
        while let Some(k) = todo.pop() {
            if keys.contains_key(&k) {
                continue;
            }
            let h = held(&k);
            let hs: Vec<&Vec<u8>> = match &h {
                Held::Free => vec![],
                Held::Lock(x) => vec![x],
                Held::Sem(xs) => xs.iter().collect(),
            };
            for x in hs {
                if x.as_slice() != waiter && holders.insert(x.clone()) {
                    for e in self.edges.get(x).into_iter().flatten() {
                        if e.live(now_ms) {
                            todo.push(e.key.clone());
                        }
                    }
                }
            }
            keys.insert(k, h);
        }

        // 2. Least fixed point of "stuck on waiter", remembering the round
        //    in which each node became stuck.
        let mut holder_round: HashMap<&[u8], usize> = HashMap::new();
        holder_round.insert(waiter, 0);
        let mut key_round: HashMap<&K, usize> = HashMap::new();
        let mut round = 0;
        loop {
            round += 1;
            let mut changed = false;
            for (k, h) in &keys {
                if key_round.contains_key(k) {
                    continue;
                }
                let stuck = match h {
                    Held::Free => false,
                    Held::Lock(x) => holder_round.contains_key(x.as_slice()),
                    Held::Sem(xs) => {
                        !xs.is_empty() && xs.iter().all(|x| holder_round.contains_key(x.as_slice()))
                    }
                };
                if stuck {
                    key_round.insert(k, round);
                    changed = true;
                }
            }
            for x in &holders {
                if holder_round.contains_key(x.as_slice()) {
                    continue;
                }
                let stuck = self.edges.get(x).into_iter().flatten().any(|e| {
                    e.live(now_ms) && key_round.get(&e.key).is_some_and(|r| *r < round + 1)
                });
                if stuck {
                    holder_round.insert(x, round);
                    changed = true;
                }
            }
            if key_round.contains_key(key) || !changed {
                break;
            }
        }
        key_round.get(key)?;

        // 3. Read the cycle back, always stepping to a node that became
        //    stuck earlier, which ends at the waiter (round 0).
        let mut path = vec![Node::Holder(waiter.to_vec()), Node::Key(key.clone())];
        let mut at = key;
        loop {
            let limit = key_round[at];
            let next = match &keys[at] {
                Held::Lock(x) => x.as_slice(),
                Held::Sem(xs) => xs
                    .iter()
                    .map(Vec::as_slice)
                    .filter(|x| holder_round.get(x).is_some_and(|r| *r < limit))
                    .min_by_key(|x| (holder_round[x] == 0, holder_round[x]))?,
                Held::Free => return None,
            };
            path.push(Node::Holder(next.to_vec()));
            if next == waiter {
                return Some(path);
            }
            let hr = holder_round[next];
            let e = self
                .edges
                .get(next)
                .into_iter()
                .flatten()
                .find(|e| e.live(now_ms) && key_round.get(&e.key).is_some_and(|r| *r <= hr))?;
            path.push(Node::Key(e.key.clone()));
            at = &e.key;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    fn names(path: &[Node<&'static str>]) -> Vec<String> {
        path.iter()
            .map(|n| match n {
                Node::Holder(h) => String::from_utf8_lossy(h).into_owned(),
                Node::Key(k) => k.to_string(),
            })
            .collect()
    }

    #[test]
    fn two_party_deadlock() {
        let mut g = WaitGraph::default();
        g.add_blocked(b"t2", "a1", 1, None);
        let held = |k: &&str| match *k {
            "a1" => Held::Lock(h("t1")),
            "a2" => Held::Lock(h("t2")),
            _ => Held::Free,
        };
        let cycle = g.cycle_if_waits(b"t1", &"a2", 0, held).unwrap();
        assert_eq!(names(&cycle), ["t1", "a2", "t2", "a1", "t1"]);
        assert!(g.cycle_if_waits(b"t3", &"a2", 0, held).is_none());
    }

    #[test]
    fn three_party_and_expiry() {
        let mut g = WaitGraph::default();
        g.declare(b"t2", "b", 100);
        g.declare(b"t3", "c", 100);
        let held = |k: &&str| match *k {
            "a" => Held::Lock(h("t2")),
            "b" => Held::Lock(h("t3")),
            "c" => Held::Lock(h("t1")),
            _ => Held::Free,
        };
        let cycle = g.cycle_if_waits(b"t1", &"a", 50, held).unwrap();
        assert_eq!(names(&cycle), ["t1", "a", "t2", "b", "t3", "c", "t1"]);
        assert!(
            g.cycle_if_waits(b"t1", &"a", 100, held).is_none(),
            "edges expired"
        );
        assert_eq!(g.len(50), 2);
        g.prune(100);
        assert!(g.is_empty());
    }

    #[test]
    fn semaphore_or_wait() {
        let mut g = WaitGraph::default();
        g.add_blocked(b"t2", "lock", 1, None);
        let held_one_free = |k: &&str| match *k {
            "sem" => Held::Sem(vec![h("t2"), h("t3")]),
            "lock" => Held::Lock(h("t1")),
            _ => Held::Free,
        };
        assert!(
            g.cycle_if_waits(b"t1", &"sem", 0, held_one_free).is_none(),
            "t3 can still finish and free a permit"
        );
        g.add_blocked(b"t3", "lock", 2, None);
        let cycle = g.cycle_if_waits(b"t1", &"sem", 0, held_one_free).unwrap();
        assert_eq!(names(&cycle)[..3], ["t1", "sem", "t2"]);
    }

    #[test]
    fn declared_edge_is_replaced_and_removed_on_acquire() {
        let mut g: WaitGraph<&str> = WaitGraph::default();
        g.declare(b"t", "a", 10);
        g.declare(b"t", "b", 10);
        assert_eq!(g.len(0), 1);
        g.acquired(b"t", &"a");
        assert_eq!(g.len(0), 1);
        g.acquired(b"t", &"b");
        assert!(g.is_empty());
    }

    /// The same least fixed point over the whole graph, the naive way.
    fn brute(edges: &[(u8, u8)], held: &HashMap<u8, (bool, Vec<u8>)>, waiter: u8, key: u8) -> bool {
        let mut stuck_h: HashSet<u8> = [waiter].into();
        let mut stuck_k: HashSet<u8> = HashSet::new();
        loop {
            let before = (stuck_h.len(), stuck_k.len());
            for (k, (_, hs)) in held {
                if !hs.is_empty() && hs.iter().all(|x| stuck_h.contains(x)) {
                    stuck_k.insert(*k);
                }
            }
            for (x, k) in edges {
                if stuck_k.contains(k) {
                    stuck_h.insert(*x);
                }
            }
            if (stuck_h.len(), stuck_k.len()) == before {
                return stuck_k.contains(&key);
            }
        }
    }

    proptest! {
        #[test]
        fn matches_brute_force(
            raw_edges in proptest::collection::vec((0u8..6, 0u8..6), 0..14),
            raw_held in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0u8..6, 0..3)), 6),
            waiter in 0u8..6,
            key in 0u8..6,
        ) {
            let held: HashMap<u8, (bool, Vec<u8>)> = raw_held.into_iter().enumerate().map(|(k, (sem, mut hs))| {
                hs.sort(); hs.dedup();
                if !sem { hs.truncate(1); }
                (k as u8, (sem, hs))
            }).collect();
            let mut g: WaitGraph<u8> = WaitGraph::default();
            for (i, (x, k)) in raw_edges.iter().enumerate() {
                g.add_blocked(&[*x], *k, i as u64, None);
            }
            let lookup = |k: &u8| {
                let (sem, hs) = &held[k];
                match (sem, hs.first()) {
                    (_, None) => Held::Free,
                    (false, Some(x)) => Held::Lock(vec![*x]),
                    (true, _) => Held::Sem(hs.iter().map(|x| vec![*x]).collect()),
                }
            };
            let got = g.cycle_if_waits(&[waiter], &key, 0, lookup);
            prop_assert_eq!(got.is_some(), brute(&raw_edges, &held, waiter, key));
            if let Some(path) = got {
                // A real path: waiter, key, holder of key, key it waits for, ... waiter.
                prop_assert_eq!(&path[0], &Node::Holder(vec![waiter]));
                prop_assert_eq!(path.last().unwrap(), &Node::Holder(vec![waiter]));
                for pair in path.windows(2) {
                    match pair {
                        [Node::Holder(x), Node::Key(k)] => prop_assert!(
                            (x == &vec![waiter] && *k == key) || raw_edges.contains(&(x[0], *k))
                        ),
                        [Node::Key(k), Node::Holder(x)] => prop_assert!(held[k].1.contains(&x[0])),
                        _ => prop_assert!(false, "path must alternate"),
                    }
                }
            }
        }
    }
}
