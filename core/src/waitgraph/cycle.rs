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
//! A would-be waiter W is deadlocked when its request is *stuck on W*: a
//! holder is stuck on W if it is W or one of its requests is; a request is
//! stuck if *some* of its `all` are, or it has `any` and *every* one is.
//! That is a least fixed point, computed over the part of the graph
//! reachable from the new request only (cost grows with the edges
//! reachable, never with all keys), and the cycle is read back along the
//! order in which holders became stuck.
//!
//! The lookups are closures so that the caller can read live state (keys in
//! Redis, edges in its own registry) without holding anything across them:
//! all reading happens in the first phase, the rest works on what was read.

use crate::hash::Map;
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

    fn stuck(&self, is: impl Fn(&[u8]) -> bool) -> bool {
        self.all.iter().any(|h| is(h)) || (!self.any.is_empty() && self.any.iter().all(|h| is(h)))
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

    // 2. Least fixed point of "stuck on waiter": each round sees only the
    //    holders stuck in earlier rounds, and notes the request that made
    //    a holder stuck.
    let mut round: Map<&[u8], (usize, usize)> = Map::default();
    round.insert(waiter, (0, 0));
    let mut r = 0;
    let stuck_first = |round: &Map<&[u8], (usize, usize)>| {
        first
            .iter()
            .position(|(_, h)| h.stuck(|y| round.contains_key(y)))
    };
    while stuck_first(&round).is_none() {
        r += 1;
        let mut newly = vec![];
        for (x, mine) in &edges {
            if round.contains_key(x.as_slice()) {
                continue;
            }
            if let Some(i) = mine
                .iter()
                .position(|(_, h)| h.stuck(|y| round.contains_key(y)))
            {
                newly.push((x.as_slice(), i));
            }
        }
        if newly.is_empty() {
            return Found::Clear;
        }
        for (x, i) in newly {
            round.insert(x, (r, i));
        }
    }

    // 3. Read the cycle back, always stepping to a holder that became
    //    stuck earlier, which ends at the waiter (round 0).
    let earliest = |h: &Held| {
        h.holders()
            .filter_map(|y| round.get_key_value(y.as_slice()))
            .min_by_key(|(_, (r, _))| *r)
            .map(|(y, (r, _))| (*y, *r))
    };
    let Some(i) = stuck_first(&round) else {
        return Found::Clear;
    };
    let (key, h) = &first[i];
    let mut path = vec![Node::Holder(waiter.to_vec()), Node::Key(key.clone())];
    let Some((mut at, mut r)) = earliest(h) else {
        return Found::Clear;
    };
    loop {
        path.push(Node::Holder(at.to_vec()));
        if r == 0 {
            return Found::Cycle(path);
        }
        let Some((k, h)) = edges.get(at).and_then(|m| m.get(round[at].1)) else {
            return Found::Clear;
        };
        path.push(Node::Key(k.clone()));
        match earliest(h).filter(|(_, next)| *next < r) {
            Some(next) => (at, r) = next,
            None => return Found::Clear,
        }
    }
}
