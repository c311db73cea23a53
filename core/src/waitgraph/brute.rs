//! The deadlock check against a brute-force model on random graphs, with
//! each of the glue's cheaper rules for the requests queued ahead.

use super::tests::fc;
use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// One wait edge of the random graphs: holder, key, and whether the
/// request shares (a reader) or excludes.
type RawEdge = (u8, u8, bool);
/// A model of who holds a key as a waiter sees it: (all of, any of).
type HeldModel =
    fn(&[RawEdge], &HashMap<u8, (u8, Vec<u8>)>, u8, u8, bool, usize) -> (Vec<u8>, Vec<u8>);

/// Whom the request of edge `i` waits for: the key's holders (AND or OR,
/// as the key says; a shared request only for holders marked as writers),
/// and every conflicting request queued on the key before it.
fn held_for(
    edges: &[RawEdge],
    keys: &HashMap<u8, (u8, Vec<u8>)>,
    x: u8,
    k: u8,
    shares: bool,
    ahead: usize,
) -> (Vec<u8>, Vec<u8>) {
    let (mode, hs) = &keys[&k];
    let (mut all, any) = match mode {
        0 => (hs.clone(), vec![]),
        1 => (vec![], hs.clone()),
        // A read-write key held by readers: a reader waits for none.
        2 if shares => (vec![], vec![]),
        // Held by readers (2) or by one writer (3): all but the requester.
        _ => (hs.iter().copied().filter(|h| *h != x).collect(), vec![]),
    };
    for (y, ky, s) in &edges[..ahead] {
        if *ky == k && *y != x && !(shares && *s) {
            all.push(*y);
        }
    }
    (all, any)
}

/// The glue's cheaper rule: only the nearest conflicting request ahead,
/// and when that one shares (a reader), the readers just before it.
fn held_nearest(
    edges: &[RawEdge],
    keys: &HashMap<u8, (u8, Vec<u8>)>,
    x: u8,
    k: u8,
    shares: bool,
    ahead: usize,
) -> (Vec<u8>, Vec<u8>) {
    let (mut all, any) = held_for(edges, keys, x, k, shares, 0);
    let before: Vec<&RawEdge> = edges[..ahead]
        .iter()
        .filter(|(y, ky, _)| *ky == k && *y != x)
        .collect();
    let mut it = before.iter().rev().skip_while(|(_, _, s)| shares && *s);
    if let Some((y, _, s)) = it.next() {
        all.push(*y);
        if *s {
            all.extend(it.take_while(|(_, _, s)| *s).map(|(y, _, _)| *y));
        }
    }
    (all, any)
}

/// The contract's definition itself (docs/commands.md): is there a set of holders containing the
/// waiter, each with a request (the waiter: its new one) that waits only
/// on members? Every subset is tried when few holders wait; past that,
/// the largest such set is found the naive way (drop non-members until
/// nothing changes), checked against the subsets on small graphs below.
fn brute(
    edges: &[RawEdge],
    keys: &HashMap<u8, (u8, Vec<u8>)>,
    waiter: u8,
    key: u8,
    shares: bool,
) -> bool {
    let stuck = |set: &HashSet<u8>, (all, any): &(Vec<u8>, Vec<u8>)| {
        all.iter().any(|y| set.contains(y))
            || (!any.is_empty() && any.iter().all(|y| set.contains(y)))
    };
    let mine = |x: u8| -> Vec<(Vec<u8>, Vec<u8>)> {
        if x == waiter {
            return vec![held_for(edges, keys, waiter, key, shares, edges.len())];
        }
        edges
            .iter()
            .enumerate()
            .filter(|(_, (y, _, _))| *y == x)
            .map(|(i, (_, k, s))| held_for(edges, keys, x, *k, *s, i))
            .collect()
    };
    let ok = |set: &HashSet<u8>| set.iter().all(|x| mine(*x).iter().any(|h| stuck(set, h)));
    let mut others: Vec<u8> = edges
        .iter()
        .map(|(x, _, _)| *x)
        .filter(|x| *x != waiter)
        .collect();
    others.sort();
    others.dedup();
    if others.len() <= 10 {
        return (0u32..1 << others.len()).any(|bits| {
            let mut set: HashSet<u8> = [waiter].into();
            set.extend(
                others
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0)
                    .map(|(_, x)| *x),
            );
            ok(&set)
        });
    }
    let mut set: HashSet<u8> = others.into_iter().chain([waiter]).collect();
    loop {
        let keep: HashSet<u8> = set
            .iter()
            .copied()
            .filter(|x| mine(*x).iter().any(|h| stuck(&set, h)))
            .collect();
        if keep.len() == set.len() {
            return set.contains(&waiter);
        }
        set = keep;
    }
}

/// The check against the brute force, with each of the glue's rules:
/// every request ahead, the nearest conflicting one, and on lock and
/// semaphore keys (no shared requests) the complex ones alone
/// (`WaitGraph::complex_ahead`).
fn check_models(
    raw_edges: Vec<RawEdge>,
    raw_keys: Vec<(u8, Vec<u8>)>,
    waiter: u8,
    key: u8,
    shares: bool,
) -> Result<(), TestCaseError> {
    // Keys held by one holder (a lock), by several any of whom may leave
    // (a semaphore), or read-write keys (mode 2 and 3).
    let keys: HashMap<u8, (u8, Vec<u8>)> = raw_keys
        .into_iter()
        .enumerate()
        .map(|(k, (mode, mut hs))| {
            hs.sort();
            hs.dedup();
            if mode == 0 || mode == 3 {
                hs.truncate(1);
            }
            (k as u8, (mode, hs))
        })
        .collect();
    // One request per holder and key: the first edge in queue order.
    let mut seen = HashSet::new();
    let edges: Vec<RawEdge> = raw_edges
        .into_iter()
        .filter(|(x, k, _)| seen.insert((*x, *k)))
        .collect();
    let mut g: WaitGraph<u8> = WaitGraph::default();
    for (i, (x, k, _)) in edges.iter().enumerate() {
        g.add_blocked(&[*x], *k, i as u64, None);
    }
    // A request's shares flag and place in the queue.
    let (edges_ref, keys_ref) = (&edges, &keys);
    let place = move |x: &[u8], k: &u8| {
        if x == [waiter] && *k == key {
            (shares, edges_ref.len())
        } else {
            let i = edges_ref
                .iter()
                .position(|(y, ky, _)| [*y] == x && ky == k)
                .unwrap();
            (edges_ref[i].2, i)
        }
    };
    let as_held = |(all, any): (Vec<u8>, Vec<u8>)| {
        let v = |hs: Vec<u8>| hs.into_iter().map(|h| vec![h]).collect();
        Held {
            all: v(all),
            any: v(any),
        }
    };
    // What `x` waits for on `k`, by one of the two models of `held`.
    let model = |held: HeldModel| {
        move |x: &[u8], k: &u8| {
            let (s, ahead) = place(x, k);
            as_held(held(edges_ref, keys_ref, x[0], *k, s, ahead))
        }
    };
    let lookup = model(held_for);
    let waits = |x: &[u8]| {
        if x == [waiter] {
            vec![]
        } else {
            g.waits_for(x, 0)
        }
    };
    let got = fc(&[waiter], &key, waits, lookup);
    prop_assert_eq!(got.is_some(), brute(&edges, &keys, waiter, key, shares));
    // Waiting for the nearest conflicting group ahead finds the same.
    let cheap = fc(&[waiter], &key, waits, model(held_nearest));
    prop_assert_eq!(cheap.is_some(), got.is_some());
    // So does waiting, on lock and semaphore keys, for the key's holders
    // and the complex requests ahead alone.
    let summary = |x: &[u8], k: &u8| {
        let (s, ahead) = place(x, k);
        let plain_key =
            keys_ref[k].0 <= 1 && !s && !edges_ref.iter().any(|(_, ky, sy)| ky == k && *sy);
        if !plain_key {
            return as_held(held_nearest(edges_ref, keys_ref, x[0], *k, s, ahead));
        }
        let (mut all, any) = held_for(edges_ref, keys_ref, x[0], *k, s, 0);
        // The nearest complex one: it waits for all those ahead of it.
        all.extend(
            g.complex_ahead(k, ahead as u64)
                .map(|id| edges_ref[id as usize].0)
                .find(|y| *y != x[0]),
        );
        // The waiter being checked has one request more than the graph
        // shows (the one it is about to queue): its queued ones count too,
        // and its new one waits for the nearest other request, when that
        // one is behind one of its own.
        let own = |before: usize| {
            edges_ref[..before]
                .iter()
                .any(|(y, ky, _)| *y == waiter && ky == k)
        };
        if x[0] != waiter && own(ahead) {
            all.push(waiter);
        }
        if x[0] == waiter {
            let nearest = edges_ref[..ahead]
                .iter()
                .rposition(|(y, ky, _)| ky == k && *y != waiter);
            if let Some(i) = nearest.filter(|&i| own(i)) {
                all.push(edges_ref[i].0);
            }
        }
        as_held((all, any))
    };
    let summed = fc(&[waiter], &key, waits, summary);
    prop_assert_eq!(summed.is_some(), got.is_some());
    // The shortcut before any of it: holders that wait for nothing.
    if clear_at_once(&[waiter], &summary(&[waiter], &key), |x| {
        waits(x).is_empty()
    }) {
        prop_assert!(got.is_none());
    }
    if let Some(path) = got {
        // A real path: waiter, key, one it waits for, key that one waits
        // for, ... back to the waiter, or (when the waiter only waits into
        // a deadlock) to a holder met before.
        prop_assert_eq!(&path[0], &Node::Holder(vec![waiter]));
        let last = path.last().unwrap();
        prop_assert!(path[..path.len() - 1].contains(last));
        for pair in path.windows(3).step_by(2) {
            match pair {
                [Node::Holder(x), Node::Key(k), Node::Holder(y)] => {
                    let held = lookup(x, k);
                    prop_assert!(held.holders().any(|h| h == y));
                }
                _ => prop_assert!(false, "path must alternate"),
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn matches_brute_force(
        raw_edges in proptest::collection::vec((0u8..6, 0u8..6, any::<bool>()), 0..14),
        raw_keys in proptest::collection::vec((0u8..4, proptest::collection::vec(0u8..6, 0..3)), 6),
        waiter in 0u8..6,
        key in 0u8..6,
        shares in any::<bool>(),
    ) {
        check_models(raw_edges, raw_keys, waiter, key, shares)?;
    }

    /// Long queues on few keys, most waiters waiting for one key alone,
    /// some for several (multi-key and second requests).
    #[test]
    fn long_queues_match_brute_force(
        raw_edges in proptest::collection::vec((0u8..24, 0u8..3, proptest::bool::weighted(0.1)), 0..60),
        raw_keys in proptest::collection::vec((0u8..4, proptest::collection::vec(0u8..24, 0..3)), 3),
        waiter in 0u8..24,
        key in 0u8..3,
        shares in proptest::bool::weighted(0.1),
    ) {
        check_models(raw_edges, raw_keys, waiter, key, shares)?;
    }
}

#[test]
fn complex_requests_are_indexed_by_key() {
    let mut g: WaitGraph<&str> = WaitGraph::default();
    g.add_blocked(b"a", "k", 1, None);
    g.add_blocked(b"b", "k", 2, None);
    assert_eq!(
        g.complex_ahead(&"k", 10).count(),
        0,
        "both wait for k alone"
    );
    g.add_blocked(b"b", "j", 3, None);
    assert_eq!(g.complex_ahead(&"k", 10).collect::<Vec<_>>(), [2]);
    assert_eq!(g.complex_ahead(&"j", 10).collect::<Vec<_>>(), [3]);
    g.declare(b"a", "x", 100);
    assert_eq!(g.complex_ahead(&"k", 10).collect::<Vec<_>>(), [2, 1]);
    assert_eq!(
        g.complex_ahead(&"k", 2).collect::<Vec<_>>(),
        [1],
        "only those ahead"
    );
    g.remove_blocked(b"b", 3);
    g.acquired(b"a", &"x");
    assert_eq!(g.complex_ahead(&"k", 10).count(), 0, "plain again");
    g.remove_blocked(b"a", 1);
    g.remove_blocked(b"b", 2);
    assert!(g.is_empty() && g.complex.is_empty());
}
