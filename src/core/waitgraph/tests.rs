use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

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
        "a1" => Held::All(vec![h("t1")]),
        "a2" => Held::All(vec![h("t2")]),
        _ => Held::Free,
    };
    let cycle = find_cycle(b"t1", &"a2", |x| g.waits_for(x, 0), held).unwrap();
    assert_eq!(names(&cycle), ["t1", "a2", "t2", "a1", "t1"]);
    assert!(find_cycle(b"t3", &"a2", |x| g.waits_for(x, 0), held).is_none());
}

#[test]
fn three_party_and_expiry() {
    let mut g = WaitGraph::default();
    g.declare(b"t2", "b", 100);
    g.declare(b"t3", "c", 100);
    let held = |k: &&str| match *k {
        "a" => Held::All(vec![h("t2")]),
        "b" => Held::All(vec![h("t3")]),
        "c" => Held::All(vec![h("t1")]),
        _ => Held::Free,
    };
    let cycle = find_cycle(b"t1", &"a", |x| g.waits_for(x, 50), held).unwrap();
    assert_eq!(names(&cycle), ["t1", "a", "t2", "b", "t3", "c", "t1"]);
    assert!(
        find_cycle(b"t1", &"a", |x| g.waits_for(x, 100), held).is_none(),
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
        "sem" => Held::Any(vec![h("t2"), h("t3")]),
        "lock" => Held::All(vec![h("t1")]),
        _ => Held::Free,
    };
    assert!(
        find_cycle(b"t1", &"sem", |x| g.waits_for(x, 0), held_one_free).is_none(),
        "t3 can still finish and free a permit"
    );
    g.add_blocked(b"t3", "lock", 2, None);
    let cycle = find_cycle(b"t1", &"sem", |x| g.waits_for(x, 0), held_one_free).unwrap();
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
        for (k, (any, hs)) in held {
            let stuck = if *any {
                !hs.is_empty() && hs.iter().all(|x| stuck_h.contains(x))
            } else {
                hs.iter().any(|x| stuck_h.contains(x))
            };
            if stuck {
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
        raw_held in proptest::collection::vec((0u8..3, proptest::collection::vec(0u8..6, 0..3)), 6),
        waiter in 0u8..6,
        key in 0u8..6,
    ) {
        // Keys held by one holder (a lock), by several all of whom must
        // leave (AND), or by several any of whom may leave (OR).
        let held: HashMap<u8, (bool, Vec<u8>)> = raw_held.into_iter().enumerate().map(|(k, (mode, mut hs))| {
            hs.sort(); hs.dedup();
            if mode == 0 { hs.truncate(1); }
            (k as u8, (mode == 1, hs))
        }).collect();
        let mut g: WaitGraph<u8> = WaitGraph::default();
        for (i, (x, k)) in raw_edges.iter().enumerate() {
            g.add_blocked(&[*x], *k, i as u64, None);
        }
        let lookup = |k: &u8| {
            let (any, hs) = &held[k];
            let hs: Vec<Vec<u8>> = hs.iter().map(|x| vec![*x]).collect();
            match (any, hs.is_empty()) {
                (_, true) => Held::Free,
                (false, false) => Held::All(hs),
                (true, false) => Held::Any(hs),
            }
        };
        let got = find_cycle(&[waiter], &key, |x| g.waits_for(x, 0), lookup);
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
