use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// One key, a generous budget: the cycle, if any.
fn fc<K: std::hash::Hash + Eq + Clone>(
    waiter: &[u8],
    key: &K,
    waits_for: impl FnMut(&[u8]) -> Vec<K>,
    held: impl FnMut(&[u8], &K) -> Held,
) -> Option<Vec<Node<K>>> {
    match find_cycle(waiter, std::slice::from_ref(key), waits_for, held, 1 << 20) {
        Found::Cycle(c) => Some(c),
        Found::Clear => None,
        Found::TooBig => panic!("budget"),
    }
}

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
    let held = |_: &[u8], k: &&str| match *k {
        "a1" => Held::all(vec![h("t1")]),
        "a2" => Held::all(vec![h("t2")]),
        _ => Held::free(),
    };
    let cycle = fc(b"t1", &"a2", |x| g.waits_for(x, 0), held).unwrap();
    assert_eq!(names(&cycle), ["t1", "a2", "t2", "a1", "t1"]);
    assert!(fc(b"t3", &"a2", |x| g.waits_for(x, 0), held).is_none());
}

#[test]
fn three_party_and_expiry() {
    let mut g = WaitGraph::default();
    g.declare(b"t2", "b", 100);
    g.declare(b"t3", "c", 100);
    let held = |_: &[u8], k: &&str| match *k {
        "a" => Held::all(vec![h("t2")]),
        "b" => Held::all(vec![h("t3")]),
        "c" => Held::all(vec![h("t1")]),
        _ => Held::free(),
    };
    let cycle = fc(b"t1", &"a", |x| g.waits_for(x, 50), held).unwrap();
    assert_eq!(names(&cycle), ["t1", "a", "t2", "b", "t3", "c", "t1"]);
    assert!(
        fc(b"t1", &"a", |x| g.waits_for(x, 100), held).is_none(),
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
    let held_one_free = |_: &[u8], k: &&str| match *k {
        "sem" => Held::any(vec![h("t2"), h("t3")]),
        "lock" => Held::all(vec![h("t1")]),
        _ => Held::free(),
    };
    assert!(
        fc(b"t1", &"sem", |x| g.waits_for(x, 0), held_one_free).is_none(),
        "t3 can still finish and free a permit"
    );
    g.add_blocked(b"t3", "lock", 2, None);
    let cycle = fc(b"t1", &"sem", |x| g.waits_for(x, 0), held_one_free).unwrap();
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

/// The same least fixed point over every edge, the naive way: repeat
/// until nothing changes, no reachability, no rounds.
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
    let mut set: HashSet<u8> = [waiter].into();
    loop {
        let before = set.len();
        for (i, (x, k, s)) in edges.iter().enumerate() {
            if *x != waiter && stuck(&set, &held_for(edges, keys, *x, *k, *s, i)) {
                set.insert(*x);
            }
        }
        if set.len() == before {
            return stuck(
                &set,
                &held_for(edges, keys, waiter, key, shares, edges.len()),
            );
        }
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
        all.extend(
            g.complex_ahead(k, ahead as u64)
                .map(|id| edges_ref[id as usize].0)
                .filter(|y| *y != x[0]),
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
    if let Some(path) = got {
        // A real path: waiter, key, one it waits for, key that one waits for, ... waiter.
        prop_assert_eq!(&path[0], &Node::Holder(vec![waiter]));
        prop_assert_eq!(path.last().unwrap(), &Node::Holder(vec![waiter]));
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

#[test]
fn several_keys_and_a_budget() {
    let mut g = WaitGraph::default();
    g.add_blocked(b"t2", "a", 1, None);
    let held = |_: &[u8], k: &&str| match *k {
        "a" => Held::all(vec![h("t1")]),
        "b" => Held::all(vec![h("t2")]),
        _ => Held::free(),
    };
    // t1 asks for c and b at once: stuck through b.
    match find_cycle(b"t1", &["c", "b"], |x| g.waits_for(x, 0), held, 100) {
        Found::Cycle(c) => assert_eq!(names(&c), ["t1", "b", "t2", "a", "t1"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        find_cycle(b"t1", &["c", "b"], |x| g.waits_for(x, 0), held, 2),
        Found::TooBig,
        "three requests to read, two allowed"
    );
    assert_eq!(
        find_cycle(b"t3", &["c"], |x| g.waits_for(x, 0), held, 100),
        Found::Clear
    );
}

#[test]
fn declared_edges_are_counted_pruned_by_time_and_flushed() {
    let mut g: WaitGraph<(i32, &str)> = WaitGraph::default();
    g.declare(b"a", (0, "k1"), 100);
    g.declare(b"a", (0, "k2"), 200); // replaces a's edge
    g.declare(b"b", (1, "k1"), 300);
    g.add_blocked(b"c", (0, "k3"), 7, Some(50));
    assert_eq!(g.declared(), 2);
    assert!(g.has_declared(b"a") && !g.has_declared(b"c"));
    g.prune(150); // a's first edge was replaced: its stale expiry is skipped
    assert_eq!(g.declared(), 2);
    g.prune(250);
    assert_eq!(g.declared(), 1, "a's edge ran out");
    assert!(!g.has_declared(b"a"));
    g.retain_declared(|k| k.0 != 1);
    assert_eq!(g.declared(), 0, "db 1 was flushed");
    assert_eq!(
        g.len(0),
        1,
        "the blocked edge stays until its client leaves"
    );
    g.remove_blocked(b"c", 7);
    assert!(g.is_empty());
}

#[test]
fn many_redeclarations_keep_the_expiry_heap_bounded() {
    let mut g: WaitGraph<u32> = WaitGraph::default();
    for i in 0..10_000 {
        g.declare(b"h", i, 1_000_000 + i64::from(i));
    }
    assert_eq!(g.declared(), 1);
    g.prune(2_000_000);
    assert_eq!(g.declared(), 0);
    assert!(g.is_empty());
}
