use super::*;
use proptest::prelude::*;

fn at(key: &str, holder: &str) -> Address {
    Address::new(0, key.as_bytes(), holder.as_bytes())
}

fn r(id: &str, print: u64, v: i64, at_ms: i64) -> Remembered {
    Remembered {
        id: id.as_bytes().into(),
        print,
        answer: Answer::Int(v),
        at_ms,
    }
}

const B: Bounds = Bounds {
    memory_ms: 1000,
    per_holder: 3,
};

#[test]
fn replays_same_request_refuses_other_arguments() {
    let mut m = Memory::default();
    m.remember(at("k", "h"), r("a", 7, 42, 0), B);
    assert_eq!(
        m.find(&at("k", "h"), b"a", 7),
        Found::Replay(&Answer::Int(42))
    );
    assert_eq!(m.find(&at("k", "h"), b"a", 8), Found::Other);
    assert_eq!(m.find(&at("k", "h"), b"b", 7), Found::New);
    assert_eq!(m.find(&at("k", "x"), b"a", 7), Found::New);
    assert_eq!(m.find(&at("j", "h"), b"a", 7), Found::New);
}

#[test]
fn keeps_the_newest_per_holder() {
    let mut m = Memory::default();
    for (i, id) in ["a", "b", "c", "d"].iter().enumerate() {
        m.remember(at("k", "h"), r(id, 1, i as i64, i as i64), B);
    }
    assert_eq!(m.len(), 3);
    assert_eq!(m.find(&at("k", "h"), b"a", 1), Found::New);
    assert_eq!(
        m.find(&at("k", "h"), b"d", 1),
        Found::Replay(&Answer::Int(3))
    );
}

#[test]
fn groups_come_due_in_order_and_can_be_kept() {
    let mut m = Memory::default();
    m.remember(at("k1", "h"), r("a", 1, 1, 0), B);
    m.remember(at("k2", "h"), r("b", 1, 1, 10), B);
    assert_eq!(m.due(999), None);
    assert_eq!(m.due(1000), Some(at("k1", "h")));
    m.keep_until(&at("k1", "h"), 5000);
    assert_eq!(m.due(1010), Some(at("k2", "h")));
    m.forget(&at("k2", "h"));
    assert_eq!(m.next_due(), Some(5000));
    assert_eq!(m.len(), 1);
    assert_eq!(m.groups(), 1);
}

#[test]
fn a_later_request_moves_the_group_back() {
    let mut m = Memory::default();
    m.remember(at("k1", "h"), r("a", 1, 1, 0), B);
    m.remember(at("k2", "h"), r("b", 1, 1, 10), B);
    m.remember(at("k1", "h"), r("c", 1, 1, 20), B);
    assert_eq!(m.due(1010), Some(at("k2", "h")));
}

#[test]
fn only_freed_keys_count_against_the_bound_oldest_first() {
    let mut m = Memory::default();
    // Held (a reply that is not 0): none of them is freed.
    for i in 0..50 {
        m.remember(at(&format!("held{i}"), "h"), r("a", 1, 7, i), B);
    }
    assert_eq!((m.freed_len(), m.oldest_freed()), (0, None));
    // A release that left 0: freed, oldest first.
    m.remember(at("k1", "h"), r("a", 1, 0, 100), B);
    m.remember(at("k2", "h"), r("b", 1, 0, 101), B);
    m.remember(at("k2", "h"), r("c", 1, 0, 102), B);
    assert_eq!(m.freed_len(), 3);
    assert_eq!(m.oldest_freed(), Some(&at("k1", "h")));
    // Taken again: held, out of the freed; a later free puts it last.
    m.remember(at("k1", "h"), r("d", 1, 9, 103), B);
    assert_eq!((m.freed_len(), m.oldest_freed()), (2, Some(&at("k2", "h"))));
    m.remember(at("k1", "h"), r("e", 1, 0, 104), B);
    assert_eq!((m.freed_len(), m.oldest_freed()), (5, Some(&at("k2", "h"))));
    // Found held after all (prune): out of the freed.
    m.keep_until(&at("k2", "h"), 5000);
    assert_eq!((m.freed_len(), m.oldest_freed()), (3, Some(&at("k1", "h"))));
    m.forget_id(&at("k1", "h"), b"e");
    assert_eq!(m.freed_len(), 2);
    m.forget(&at("k1", "h"));
    assert_eq!((m.freed_len(), m.oldest_freed()), (0, None));
    // An array reply holds when any of it is not 0.
    let ints = |v: Vec<i64>| Remembered {
        id: b"m"[..].into(),
        print: 1,
        answer: Answer::Ints(v.into()),
        at_ms: 200,
    };
    m.remember(at("m1", "h"), ints(vec![0, 3]), B);
    m.remember(at("m2", "h"), ints(vec![0, 0]), B);
    assert_eq!((m.freed_len(), m.oldest_freed()), (1, Some(&at("m2", "h"))));
}

#[test]
fn forgets_ids_and_databases() {
    let mut m = Memory::default();
    m.remember(at("k", "h"), r("a", 1, 1, 0), B);
    m.remember(at("k", "h"), r("b", 1, 1, 0), B);
    let mut other = at("k", "h");
    other.db = 3;
    m.remember(other.clone(), r("a", 1, 1, 0), B);
    m.forget_id(&at("k", "h"), b"a");
    assert_eq!(m.find(&at("k", "h"), b"a", 1), Found::New);
    assert_eq!(m.len(), 2);
    m.forget_db(Some(0));
    assert_eq!(m.len(), 1);
    assert_eq!(m.find(&other, b"a", 1), Found::Replay(&Answer::Int(1)));
    m.forget_db(None);
    assert!(m.is_empty());
    assert_eq!(m.groups(), 0);
}

#[test]
fn of_key_lists_every_holder() {
    let mut m = Memory::default();
    m.remember(at("k", "h1"), r("a", 1, 1, 0), B);
    m.remember(at("k", "h2"), r("b", 1, 2, 0), B);
    m.remember(at("j", "h1"), r("c", 1, 3, 0), B);
    let mut seen: Vec<_> = m
        .of_key(0, b"k")
        .map(|(h, r)| (h.to_vec(), r.id.to_vec()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (b"h1".to_vec(), b"a".to_vec()),
            (b"h2".to_vec(), b"b".to_vec())
        ]
    );
    assert_eq!(m.all().count(), 3);
}

#[test]
fn prints_tell_arguments_apart() {
    let a: [&[u8]; 2] = [b"ab", b"c"];
    let b: [&[u8]; 2] = [b"a", b"bc"];
    assert_ne!(print(a), print(b));
    assert_eq!(print(a), print([&b"ab"[..], &b"c"[..]]));
    assert!(valid_id(b"x") && !valid_id(b"") && !valid_id(&[b'x'; 65]));
}

/// Prints are saved and replicated: the same arguments print the same on
/// every version (these values were taken before `Quick` read whole words).
#[test]
fn prints_are_stable_across_versions() {
    let acquire: [&[u8]; 4] = [b"lock.acquire", b"k:1", b"holder", b"5000"];
    assert_eq!(print(acquire), 12_289_171_857_191_568_213);
    let sem: [&[u8]; 7] = [
        b"sem.acquire",
        b"a-key-longer-than-eight",
        b"h",
        b"3",
        b"60000",
        b"PERMITS",
        b"2",
    ];
    assert_eq!(print(sem), 3_172_990_397_275_152_168);
}

proptest! {
    /// Against a model: every remembered id is found until forgotten, the
    /// count matches, and no group holds more than `per_holder`.
    #[test]
    fn matches_a_model(ops in prop::collection::vec((0u8..3, 0u8..3, 0u8..6, 0u8..5), 1..200)) {
        let mut m = Memory::default();
        // Each group's ids, and when its latest request freed the key.
        let mut model: Vec<(Address, Vec<Box<[u8]>>)> = Vec::new();
        let mut freed: Vec<(Address, usize)> = Vec::new();
        for (i, (k, h, id, op)) in ops.into_iter().enumerate() {
            let a = at(&k.to_string(), &h.to_string());
            let id_s = id.to_string();
            let pos = model.iter().position(|(x, _)| *x == a);
            match op {
                0 => {
                    m.forget(&a);
                    if let Some(p) = pos { model.remove(p); }
                    freed.retain(|(x, _)| *x != a);
                }
                1 => {
                    m.forget_id(&a, id_s.as_bytes());
                    if let Some(p) = pos {
                        model[p].1.retain(|x| **x != *id_s.as_bytes());
                        if model[p].1.is_empty() {
                            model.remove(p);
                            freed.retain(|(x, _)| *x != a);
                        }
                    }
                }
                4 => {
                    m.keep_until(&a, 10_000 + i as i64);
                    freed.retain(|(x, _)| *x != a);
                }
                _ => {
                    // One reply in three is 0: a request that freed the key.
                    let answer = (i % 3) as i64;
                    m.remember(a.clone(), r(&id_s, 1, answer, i as i64), B);
                    let p = pos.unwrap_or_else(|| { model.push((a.clone(), Vec::new())); model.len() - 1 });
                    let ids = &mut model[p].1;
                    ids.retain(|x| **x != *id_s.as_bytes());
                    ids.push(id_s.as_bytes().into());
                    while ids.len() > B.per_holder { ids.remove(0); }
                    freed.retain(|(x, _)| *x != a);
                    if answer == 0 { freed.push((a.clone(), i)); }
                }
            }
            let freed_ids: usize = freed
                .iter()
                .map(|(f, _)| model.iter().find(|(x, _)| x == f).map_or(0, |(_, v)| v.len()))
                .sum();
            prop_assert_eq!(m.freed_len(), freed_ids);
            prop_assert_eq!(m.oldest_freed(), freed.first().map(|(a, _)| a));
            let total: usize = model.iter().map(|(_, v)| v.len()).sum();
            prop_assert_eq!(m.len(), total);
            prop_assert_eq!(m.groups(), model.len());
            for (a, ids) in &model {
                for x in ids {
                    prop_assert!(matches!(m.find(a, x, 1), Found::Replay(_)));
                }
            }
            // Nothing but the model's: every id of every group, by key too.
            for k in 0u8..3 {
                for h in 0u8..3 {
                    let a = at(&k.to_string(), &h.to_string());
                    let ids = model.iter().find(|(x, _)| *x == a).map(|(_, v)| v.clone()).unwrap_or_default();
                    for id in 0u8..6 {
                        let id = id.to_string();
                        let held = ids.iter().any(|x| **x == *id.as_bytes());
                        prop_assert_eq!(matches!(m.find(&a, id.as_bytes(), 1), Found::Replay(_)), held);
                    }
                }
                let mut by_key: Vec<(Vec<u8>, Vec<u8>)> = m
                    .of_key(0, k.to_string().as_bytes())
                    .map(|(h, r)| (h.to_vec(), r.id.to_vec()))
                    .collect();
                let mut want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .filter(|(a, _)| a.key() == k.to_string().as_bytes())
                    .flat_map(|(a, v)| v.iter().map(move |x| (a.holder().to_vec(), x.to_vec())))
                    .collect();
                by_key.sort();
                want.sort();
                prop_assert_eq!(by_key, want);
            }
            prop_assert_eq!(m.all().count(), total);
        }
    }
}

#[test]
fn spots_find_id_and_block_among_options() {
    let args: Vec<&[u8]> = vec![b"k", b"h", b"10", b"KEEP", b"id", b"r1", b"BLOCK", b"5"];
    assert_eq!(
        spots(&args, 3),
        Ok(Spots {
            id: Some(5),
            block: Some(7),
            mailbox: None
        })
    );
    let args: Vec<&[u8]> = vec![b"k", b"h", b"10", b"ID"];
    assert_eq!(spots(&args, 3), Err(Error::Syntax));
    let args: Vec<&[u8]> = vec![b"k", b"h", b"10", b"ID", b""];
    assert_eq!(
        spots(&args, 3),
        Err(Error::RequestIdLength { max: MAX_ID_LEN })
    );
    // "ID" as a holder is not an option.
    let args: Vec<&[u8]> = vec![b"k", b"ID", b"10"];
    assert_eq!(spots(&args, 3), Ok(Spots::default()));
}

#[test]
fn a_key_that_went_by_itself_counts_among_the_freed() {
    let mut m = Memory::default();
    m.remember(at("k", "a"), r("1", 1, 1, 10), B);
    m.remember(at("k", "b"), r("2", 1, 3, 20), B);
    m.remember(at("j", "a"), r("3", 1, 1, 5), B);
    assert_eq!(m.freed_len(), 0, "all held");
    m.key_gone(0, b"k");
    assert_eq!(m.freed_len(), 2);
    assert_eq!(
        m.oldest_freed(),
        Some(&at("k", "a")),
        "oldest latest request first"
    );
    m.key_gone(0, b"k");
    assert_eq!(m.freed_len(), 2, "counted once");
    m.key_gone(1, b"j");
    assert_eq!(m.freed_len(), 2, "another database's key");
    m.remember(at("k", "a"), r("4", 1, 1, 30), B);
    assert_eq!(m.freed_len(), 1, "taken again: held, not freed");
    m.forget(&at("k", "b"));
    assert_eq!((m.freed_len(), m.len()), (0, 3));
}

proptest! {
    /// A known group's request moves only its due time; `due` still gives
    /// every group exactly when its latest request is `memory_ms` old
    /// (fewer groups than the look-back: exact), never before.
    #[test]
    fn due_follows_each_groups_latest_request(ops in prop::collection::vec((0u8..6, 0i64..40, any::<bool>()), 1..120)) {
        let mut m = Memory::default();
        let mut latest: Vec<(Address, i64)> = Vec::new();
        let mut now = 0i64;
        for (k, step, drain) in ops {
            now += step;
            if drain {
                let check = now + B.memory_ms;
                let mut got = Vec::new();
                for _ in 0..1000 {
                    match m.due(check) {
                        Some(a) => { m.forget(&a); got.push(a); }
                        None if m.next_due().is_some_and(|d| d <= check) => {}
                        None => break,
                    }
                }
                let mut want: Vec<Address> = latest.iter().filter(|(_, t)| t + B.memory_ms <= check).map(|(a, _)| a.clone()).collect();
                latest.retain(|(_, t)| t + B.memory_ms > check);
                got.sort();
                want.sort();
                prop_assert_eq!(got, want);
            } else {
                let a = at(&k.to_string(), "h");
                m.remember(a.clone(), r("x", 1, 1, now), B);
                latest.retain(|(x, _)| *x != a);
                latest.push((a, now));
            }
        }
    }
}
