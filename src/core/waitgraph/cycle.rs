//! Would a waiter deadlock? Each key names who holds it and how a waiter
//! waits for them (`Held`):
//!
//! - `All`: every holder must leave (a lock's one holder; a writer waiting
//!   for the readers of a read-write lock): an AND-wait;
//! - `Any`: one holder leaving is enough (a semaphore: any holder that
//!   finishes frees permits): an OR-wait.
//!
//! A would-be waiter W is deadlocked when the key it wants is *stuck on W*:
//! a holder is stuck on W if it is W or waits for a key stuck on W; an
//! `All` key is stuck if *some* holder is, an `Any` key if it has holders
//! and *every* one is. That is a least fixed point, computed over the part
//! of the graph reachable from the wanted key only (cost grows with the
//! edges reachable, never with all keys), and the cycle is read back along
//! the order in which nodes became stuck.
//!
//! The lookups are closures so that the caller can read live state (keys in
//! Redis, edges in its own registry) without holding anything across them:
//! all reading happens in the first phase, the rest works on what was read.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use super::Node;

/// Who holds a key right now, and what a waiter needs of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Free,
    All(Vec<Vec<u8>>),
    Any(Vec<Vec<u8>>),
}

impl Held {
    pub fn holders(&self) -> &[Vec<u8>] {
        match self {
            Held::Free => &[],
            Held::All(hs) | Held::Any(hs) => hs,
        }
    }
}

/// The cycle `waiter, key, holder, key, ..., waiter` that `waiter` waiting
/// for `key` would close, if any. `waits_for(h)`: the keys holder `h` waits
/// for now; `held(k)`: who holds key `k`.
pub fn find_cycle<K: Hash + Eq + Clone>(
    waiter: &[u8],
    key: &K,
    mut waits_for: impl FnMut(&[u8]) -> Vec<K>,
    mut held: impl FnMut(&K) -> Held,
) -> Option<Vec<Node<K>>> {
    // 1. Read what is reachable from `key`.
    let mut keys: HashMap<K, Held> = HashMap::new();
    let mut edges: HashMap<Vec<u8>, Vec<K>> = HashMap::new();
    let mut todo = vec![key.clone()];
    while let Some(k) = todo.pop() {
        if keys.contains_key(&k) {
            continue;
        }
        let h = held(&k);
        for x in h.holders() {
            if x.as_slice() != waiter && !edges.contains_key(x) {
                let ks = waits_for(x);
                todo.extend(ks.iter().cloned());
                edges.insert(x.clone(), ks);
            }
        }
        keys.insert(k, h);
    }

    // 2. Least fixed point of "stuck on waiter", with the round in which
    //    each node became stuck.
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
            let stuck = |x: &Vec<u8>| holder_round.contains_key(x.as_slice());
            let is_stuck = match h {
                Held::Free => false,
                Held::All(xs) => xs.iter().any(stuck),
                Held::Any(xs) => !xs.is_empty() && xs.iter().all(stuck),
            };
            if is_stuck {
                key_round.insert(k, round);
                changed = true;
            }
        }
        for (x, ks) in &edges {
            if holder_round.contains_key(x.as_slice()) {
                continue;
            }
            if ks
                .iter()
                .any(|k| key_round.get(k).is_some_and(|r| *r <= round))
            {
                holder_round.insert(x, round);
                changed = true;
            }
        }
        if key_round.contains_key(key) || !changed {
            break;
        }
    }
    key_round.get(key)?;

    // 3. Read the cycle back, always stepping to a node that became stuck
    //    earlier, which ends at the waiter (round 0).
    let mut path = vec![Node::Holder(waiter.to_vec()), Node::Key(key.clone())];
    let mut seen: HashSet<&K> = HashSet::new();
    let mut at = key;
    loop {
        if !seen.insert(at) {
            return None;
        }
        let limit = key_round[at];
        let next = keys[at]
            .holders()
            .iter()
            .map(Vec::as_slice)
            .filter(|x| holder_round.get(x).is_some_and(|r| *r < limit))
            .min_by_key(|x| (holder_round[x] == 0, holder_round[x]))?;
        path.push(Node::Holder(next.to_vec()));
        if next == waiter {
            return Some(path);
        }
        let hr = holder_round[next];
        let k = edges
            .get(next)?
            .iter()
            .find(|k| key_round.get(k).is_some_and(|r| *r <= hr))?;
        path.push(Node::Key(k.clone()));
        at = k;
    }
}
