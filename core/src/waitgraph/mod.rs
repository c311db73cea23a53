//! The wait-for graph and its deadlock check.
//!
//! Edges go from a holder to a key it waits for: one per client blocked with
//! `BLOCK`, and one per holder declared with `LOCK.WAITFOR`. An edge leads
//! to whom that request waits for (`Held`: the key's holders it cannot
//! share with, and conflicting requests queued ahead of it), which the
//! caller supplies at check time, so the graph never duplicates lock state.
//!
//! The deadlock check itself is `cycle::find_cycle`.

#[cfg(test)]
mod brute;
mod cycle;
#[cfg(test)]
mod tests;

use crate::hash::Map;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::hash::Hash;

pub use cycle::{clear_at_once, find_cycle, Found, Held};

/// What a request needs of a key: to be alone with it, or to share it
/// with other sharing requests (readers of a read-write lock). Requests
/// conflict unless both share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Exclusive,
    Shared,
}

impl Need {
    pub fn conflicts(self, other: Need) -> bool {
        !(self == Need::Shared && other == Need::Shared)
    }
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

/// Adds (`on`) or removes a blocked edge's request in the complex index.
fn mark<K: Hash + Eq + Clone>(complex: &mut Map<K, BTreeSet<u64>>, e: &Edge<K>, on: bool) {
    let Source::Blocked(id) = e.source else {
        return;
    };
    if on {
        complex.entry(e.key.clone()).or_default().insert(id);
    } else if let Some(set) = complex.get_mut(&e.key) {
        set.remove(&id);
        if set.is_empty() {
            complex.remove(&e.key);
        }
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
    edges: Map<Vec<u8>, Vec<Edge<K>>>,
    /// Per key, the blocked requests whose holder has another edge too (a
    /// multi-key request, a second client, a declared wait). A request
    /// whose holder waits for this key alone reaches only what the key's
    /// holders and the requests ahead of it reach, so a check on a lock or
    /// semaphore key reads these, not the whole queue (see `complex_ahead`).
    complex: Map<K, BTreeSet<u64>>,
    /// Declared edges (`LOCK.WAITFOR`), counted for `max-wait-edges`.
    declared: usize,
    /// When each declared edge runs out (a replaced edge leaves a stale
    /// entry, skipped when it comes up): pruning costs what ran out, not
    /// what exists.
    expiry: BinaryHeap<Reverse<(i64, Vec<u8>)>>,
}

impl<K> Default for WaitGraph<K> {
    fn default() -> Self {
        WaitGraph {
            edges: Map::default(),
            complex: Map::default(),
            declared: 0,
            expiry: BinaryHeap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> WaitGraph<K> {
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    fn add(&mut self, holder: &[u8], edge: Edge<K>) {
        let list = self.edges.entry(holder.to_vec()).or_default();
        list.push(edge);
        // The holder's requests are complex from its second edge on.
        match list.len() {
            1 => {}
            2 => {
                for e in list.iter() {
                    mark(&mut self.complex, e, true);
                }
            }
            _ => {
                if let Some(e) = list.last() {
                    mark(&mut self.complex, e, true);
                }
            }
        }
    }

    fn remove_where(&mut self, holder: &[u8], pred: impl Fn(&Edge<K>) -> bool) {
        if let Some(list) = self.edges.get_mut(holder) {
            let declared = &mut self.declared;
            let complex = &mut self.complex;
            list.retain(|e| {
                let gone = pred(e);
                if gone {
                    mark(complex, e, false);
                    if e.source == Source::Declared {
                        *declared -= 1;
                    }
                }
                !gone
            });
            // Down to one edge: that request is plain again.
            if let [only] = list.as_slice() {
                mark(complex, only, false);
            }
            if list.is_empty() {
                self.edges.remove(holder);
            }
        }
    }

    /// Whether `holder` has any edge (a blocked request or a declared
    /// wait, live or not yet pruned).
    pub fn has_edges(&self, holder: &[u8]) -> bool {
        self.edges.contains_key(holder)
    }

    /// The first blocked request of `holder` on `key` (its waiter id).
    pub fn first_blocked(&self, holder: &[u8], key: &K) -> Option<u64> {
        self.edges
            .get(holder)?
            .iter()
            .filter(|e| &e.key == key)
            .filter_map(|e| match e.source {
                Source::Blocked(id) => Some(id),
                Source::Declared => None,
            })
            .min()
    }

    /// The complex requests (see `complex`) queued on `key` before waiter
    /// id `before`, nearest first.
    pub fn complex_ahead(&self, key: &K, before: u64) -> impl Iterator<Item = u64> + '_ {
        self.complex
            .get(key)
            .into_iter()
            .flat_map(move |s| s.range(..before).rev().copied())
    }

    /// Declared edges alive or not yet pruned.
    pub fn declared(&self) -> usize {
        self.declared
    }

    /// Whether `holder` has a declared edge (a new one replaces it).
    pub fn has_declared(&self, holder: &[u8]) -> bool {
        self.edges
            .get(holder)
            .is_some_and(|l| l.iter().any(|e| e.source == Source::Declared))
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
        self.declared += 1;
        self.expiry.push(Reverse((expires_at, holder.to_vec())));
        if self.expiry.len() > 2 * self.declared + 1024 {
            self.rebuild_expiry();
        }
    }

    /// Drops the stale entries of replaced or removed edges.
    fn rebuild_expiry(&mut self) {
        self.expiry = self
            .edges
            .iter()
            .flat_map(|(h, l)| {
                l.iter()
                    .filter(|e| e.source == Source::Declared)
                    .filter_map(move |e| e.expires_at.map(|t| Reverse((t, h.clone()))))
            })
            .collect();
    }

    /// Removes the declared edges whose key `keep` refuses (a flushed
    /// database).
    pub fn retain_declared(&mut self, keep: impl Fn(&K) -> bool) {
        let holders: Vec<Vec<u8>> = self.edges.keys().cloned().collect();
        for h in holders {
            self.remove_where(&h, |e| e.source == Source::Declared && !keep(&e.key));
        }
        self.rebuild_expiry();
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

    /// Drops declared edges whose time ran out, at the cost of those alone
    /// (a blocked client's edge goes with the client, at its timeout).
    pub fn prune(&mut self, now_ms: i64) {
        while let Some(Reverse((t, _))) = self.expiry.peek() {
            if *t > now_ms {
                break;
            }
            let Some(Reverse((t, h))) = self.expiry.pop() else {
                break;
            };
            self.remove_where(&h, |e| {
                e.source == Source::Declared && e.expires_at == Some(t)
            });
        }
    }

    pub fn len(&self, now_ms: i64) -> usize {
        let (declared, blocked) = self.counts(now_ms);
        declared + blocked
    }

    /// Live edges: (declared with `LOCK.WAITFOR`, of blocked requests).
    pub fn counts(&self, now_ms: i64) -> (usize, usize) {
        let mut declared = 0;
        let mut blocked = 0;
        for e in self.edges.values().flatten().filter(|e| e.live(now_ms)) {
            match e.source {
                Source::Declared => declared += 1,
                Source::Blocked(_) => blocked += 1,
            }
        }
        (declared, blocked)
    }

    /// The keys `holder` waits for now (live edges only).
    #[cfg(test)]
    pub fn waits_for(&self, holder: &[u8], now_ms: i64) -> Vec<K> {
        self.edges
            .get(holder)
            .into_iter()
            .flatten()
            .filter(|e| e.live(now_ms))
            .map(|e| e.key.clone())
            .collect()
    }

    /// The keys `holder` waits for now, each with its first blocked
    /// client's waiter id (None: a declared wait).
    pub fn waits_for_by(&self, holder: &[u8], now_ms: i64) -> Vec<(K, Option<u64>)> {
        let mut out: Vec<(K, Option<u64>)> = vec![];
        let mut at: Map<&K, usize> = Map::default();
        for e in self
            .edges
            .get(holder)
            .into_iter()
            .flatten()
            .filter(|e| e.live(now_ms))
        {
            let id = match e.source {
                Source::Blocked(id) => Some(id),
                Source::Declared => None,
            };
            match at.get(&e.key) {
                Some(&i) => {
                    let have = &mut out[i].1;
                    *have = match (*have, id) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => {
                    at.insert(&e.key, out.len());
                    out.push((e.key.clone(), id));
                }
            }
        }
        out
    }

    /// At most `count` live edges whose key `keep` accepts (the first met
    /// when there are more), holder by holder (holders in no particular
    /// order), each holder's soonest to run out first: O(count), no copy of
    /// an edge, so that a big graph is read without a long pause. (Ordering
    /// the holders too was a third of `LOCK.GRAPH`'s cost at 10,000 edges.)
    pub fn edges(
        &self,
        now_ms: i64,
        count: usize,
        keep: impl Fn(&K) -> bool,
    ) -> Vec<(&[u8], &Edge<K>)> {
        let mut out: Vec<(&[u8], &Edge<K>)> = Vec::new();
        for (h, list) in &self.edges {
            if out.len() >= count {
                break;
            }
            let start = out.len();
            // `keep` may be an ACL check per key: asked only until the
            // reply is full.
            out.extend(
                list.iter()
                    .filter(|e| e.live(now_ms) && keep(&e.key))
                    .take(count - start)
                    .map(|e| (h.as_slice(), e)),
            );
            out[start..].sort_unstable_by_key(|(_, e)| e.expires_at);
        }
        out
    }
}
