//! Would a waiter deadlock? Each wait edge *holder → key* names whom that
//! request waits for (`Held`), which depends on the request as much as on
//! the key: a writer waits for every other holder of a read-write lock, a
//! reader only for its writer, and any request for the conflicting
//! requests queued ahead of it. Those it waits for are of two sorts:
//!
//! - `all`: every one must leave or be served (a lock's holder, the readers
//!   a writer waits for, requests queued ahead): an AND-wait;
//! - `any`: one leaving is enough (semaphore holders: any that finishes
//!   frees permits): an OR-wait.
//!
//! A set of holders is deadlocked when each has a request that waits only
//! on members: *some* of its `all` is one, or it has `any` and *every* one
//! is. A would-be waiter W deadlocks when such a set containing W exists
//! (W counting by its new request). The largest such set is a greatest
//! fixed point: start from every holder reachable from the new request
//! and drop, one at a time, those with no request waiting only on those
//! left. (A least fixed point seeded from W alone, as this once was, never
//! counts a member whose own stuckness goes round through an OR-wait: a
//! full semaphore's permit holders that wait for the very lock W waits
//! for.) Cost grows with the edges reachable, never with all keys; the
//! cycle is read back breadth first.
//!
//! The lookups are closures so that the caller can read live state (keys in
//! Redis, edges in its own registry) without holding anything across them:
//! all reading happens in the first phase, the rest works on what was read.

use crate::hash::{Map, Set};
use std::hash::Hash;

use super::Node;

/// Whom one request waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub all: Vec<Vec<u8>>,
    pub any: Vec<Vec<u8>>,
}

impl Held {
    pub fn free() -> Held {
        Held::default()
    }

    pub fn all(all: Vec<Vec<u8>>) -> Held {
        Held { all, any: vec![] }
    }

    pub fn any(any: Vec<Vec<u8>>) -> Held {
        Held { all: vec![], any }
    }

    pub fn is_free(&self) -> bool {
        self.all.is_empty() && self.any.is_empty()
    }

    /// Everyone named, `all` first.
    pub fn holders(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.all.iter().chain(&self.any)
    }

    /// True when `holder` alone is named, and must leave (a lock it holds:
    /// semaphore permits it holds are still waited for, as more may
    /// never come).
    pub fn only(&self, holder: &[u8]) -> bool {
        self.any.is_empty() && matches!(self.all.as_slice(), [h] if h == holder)
    }
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<K> {
    /// The cycle `waiter, key, holder, key, ..., waiter`.
    Cycle(Vec<Node<K>>),
    Clear,
    /// More of the graph is reachable than `budget` allows looking at: no
    /// answer (the wait is allowed; timeouts remain the guard).
    TooBig,
}

/// A request that waits only for holders who wait for nothing (`idle`)
/// cannot be stuck on its own holder: no cycle, and nothing more to read
/// (the common case on a hot key, so the check builds no graph for it).
pub fn clear_at_once(waiter: &[u8], first: &Held, idle: impl Fn(&[u8]) -> bool) -> bool {
    first.holders().all(|h| h.as_slice() != waiter && idle(h))
}

/// Whether `waiter` waiting for `keys` (one request: stuck if any of its
/// keys is) would close a cycle. `waits_for(h)`: the keys holder `h` waits
/// for now; `held(h, k)`: whom `h`'s request on `k` waits for (for the new
/// request too: `held(waiter, k)`). At most `budget` requests are read.
pub fn find_cycle<K: Hash + Eq + Clone>(
    waiter: &[u8],
    keys: &[K],
    mut waits_for: impl FnMut(&[u8]) -> Vec<K>,
    mut held: impl FnMut(&[u8], &K) -> Held,
    budget: usize,
) -> Found<K> {
    // 1. Read what is reachable from the new request.
    let first: Vec<(K, Held)> = keys.iter().map(|k| (k.clone(), held(waiter, k))).collect();
    let mut read = first.len();
    let mut edges: Map<Vec<u8>, Vec<(K, Held)>> = Map::default();
    let mut todo: Vec<Vec<u8>> = first
        .iter()
        .flat_map(|(_, h)| h.holders().cloned())
        .collect();
    while let Some(x) = todo.pop() {
        if x == waiter || edges.contains_key(&x) {
            continue;
        }
        let ks = waits_for(&x);
        read += ks.len();
        if read > budget {
            return Found::TooBig;
        }
        let mine: Vec<(K, Held)> = ks
            .into_iter()
            .map(|k| {
                let h = held(&x, &k);
                (k, h)
            })
            .collect();
        todo.extend(mine.iter().flat_map(|(_, h)| h.holders().cloned()));
        edges.insert(x, mine);
    }

    // 2. The largest deadlocked set: a holder stays while one of its
    //    requests waits only on members (some `all` is one, or every
    //    `any` is); the waiter counts by its new request alone. Holders
    //    are dropped one by one, each drop touching only the requests that
    //    name it, so this is linear in what was read.
    let set = Deadlocked::of(waiter, &first, &edges);
    if !set.has(waiter) {
        return Found::Clear;
    }
    Found::Cycle(set.path(waiter, &first, &edges))
}

/// A request read in phase 1: its owner, its key and whom it waits for.
struct Req<'a> {
    owner: &'a [u8],
    held: &'a Held,
    /// Members among `held.all` (with repeats), and non-members among
    /// `held.any`.
    all_in: usize,
    any_out: usize,
}

impl Req<'_> {
    fn stuck(&self) -> bool {
        self.all_in > 0 || (!self.held.any.is_empty() && self.any_out == 0)
    }
}

/// The greatest set of holders each of which has a request waiting only
/// on members (docs/commands.md "Deadlock detection": each waits for a key all of
/// whose holders are in the set), over the graph read from one waiter.
struct Deadlocked<'a> {
    members: Set<&'a [u8]>,
}

impl<'a> Deadlocked<'a> {
    fn of<K>(
        waiter: &'a [u8],
        first: &'a [(K, Held)],
        edges: &'a Map<Vec<u8>, Vec<(K, Held)>>,
    ) -> Deadlocked<'a> {
        let mut members: Set<&[u8]> = edges.keys().map(|x| x.as_slice()).collect();
        members.insert(waiter);
        let mut reqs: Vec<Req<'a>> = Vec::new();
        let owned = std::iter::once((waiter, first))
            .chain(edges.iter().map(|(x, m)| (x.as_slice(), m.as_slice())));
        for (owner, mine) in owned {
            for (_, held) in mine {
                reqs.push(Req {
                    owner,
                    held,
                    all_in: held
                        .all
                        .iter()
                        .filter(|y| members.contains(y.as_slice()))
                        .count(),
                    any_out: held
                        .any
                        .iter()
                        .filter(|y| !members.contains(y.as_slice()))
                        .count(),
                });
            }
        }
        // Who names whom (true: in `all`), and each member's stuck
        // requests.
        let mut named: Map<&[u8], Vec<(usize, bool)>> = Map::default();
        let mut live: Map<&[u8], usize> = members.iter().map(|x| (*x, 0)).collect();
        for (i, r) in reqs.iter().enumerate() {
            for y in &r.held.all {
                named.entry(y.as_slice()).or_default().push((i, true));
            }
            for y in &r.held.any {
                named.entry(y.as_slice()).or_default().push((i, false));
            }
            if r.stuck() {
                *live.entry(r.owner).or_default() += 1;
            }
        }
        let mut drop: Vec<&[u8]> = live
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(x, _)| *x)
            .collect();
        while let Some(x) = drop.pop() {
            if !members.remove(x) {
                continue;
            }
            for &(i, in_all) in named.get(x).map_or(&[][..], |v| v.as_slice()) {
                let r = &mut reqs[i];
                let was = r.stuck();
                if in_all {
                    r.all_in -= 1;
                } else {
                    r.any_out += 1;
                }
                if was && !r.stuck() {
                    if let Some(n) = live.get_mut(r.owner) {
                        *n -= 1;
                        if *n == 0 && members.contains(r.owner) {
                            drop.push(r.owner);
                        }
                    }
                }
            }
        }
        Deadlocked { members }
    }

    fn has(&self, x: &[u8]) -> bool {
        self.members.contains(x)
    }

    /// The members one of `x`'s requests waits on, with that request's
    /// key: every request of `x` that waits only on members.
    fn next<'k, K>(&self, mine: &'k [(K, Held)]) -> Vec<(&'k K, &'k [u8])> {
        let mut out = vec![];
        for (k, h) in mine {
            let all: Vec<&[u8]> = h
                .all
                .iter()
                .map(|y| y.as_slice())
                .filter(|y| self.has(y))
                .collect();
            let any_stuck = !h.any.is_empty() && h.any.iter().all(|y| self.has(y));
            if !all.is_empty() {
                out.extend(all.into_iter().map(|y| (k, y)));
            } else if any_stuck {
                out.extend(h.any.iter().map(|y| (k, y.as_slice())));
            }
        }
        out
    }

    /// The cycle to report: the shortest way from the waiter back to it
    /// through members; when the waiter only waits into a deadlock that
    /// does not wait for it, the way into that cycle, ending at the first
    /// holder met twice.
    fn path<'g, K: Clone>(
        &self,
        waiter: &'g [u8],
        first: &'g [(K, Held)],
        edges: &'g Map<Vec<u8>, Vec<(K, Held)>>,
    ) -> Vec<Node<K>> {
        let mine = |x: &[u8]| -> Vec<(&'g K, &'g [u8])> {
            if x == waiter {
                self.next(first)
            } else {
                edges.get(x).map_or_else(Vec::new, |m| self.next(m))
            }
        };
        // Breadth first from the waiter: how each member was reached.
        let mut from: Map<&'g [u8], (&'g [u8], &'g K)> = Map::default();
        let mut queue = std::collections::VecDeque::from([waiter]);
        let mut back: Option<(&'g [u8], &'g K)> = None;
        'search: while let Some(x) = queue.pop_front() {
            for (k, y) in mine(x) {
                if y == waiter {
                    back = Some((x, k));
                    break 'search;
                }
                if y != waiter && !from.contains_key(y) {
                    from.insert(y, (x, k));
                    queue.push_back(y);
                }
            }
        }
        let walk_back = |mut at: &'g [u8], tail: Vec<Node<K>>| {
            let mut rev = tail;
            while at != waiter {
                rev.push(Node::Holder(at.to_vec()));
                let Some((prev, k)) = from.get(at) else { break };
                rev.push(Node::Key((*k).clone()));
                at = prev;
            }
            rev.push(Node::Holder(waiter.to_vec()));
            rev.reverse();
            rev
        };
        if let Some((last, k)) = back {
            return walk_back(
                last,
                vec![Node::Holder(waiter.to_vec()), Node::Key(k.clone())],
            );
        }
        // No way back: walk on until a holder repeats.
        let mut path = vec![Node::Holder(waiter.to_vec())];
        let mut seen: Set<&'g [u8]> = [waiter].into_iter().collect();
        let mut at = waiter;
        while let Some((k, y)) = mine(at).into_iter().next() {
            path.push(Node::Key(k.clone()));
            path.push(Node::Holder(y.to_vec()));
            if !seen.insert(y) {
                break;
            }
            at = y;
        }
        path
    }
}
