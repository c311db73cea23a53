use super::*;
use proptest::prelude::*;

fn at(key: &str, holder: &str) -> Address {
    Address {
        db: 0,
        key: key.as_bytes().into(),
        holder: holder.as_bytes().into(),
    }
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
    assert_eq!(m.due(1000), Some(&at("k1", "h")));
    m.keep_until(&at("k1", "h"), 5000);
    assert_eq!(m.due(1010), Some(&at("k2", "h")));
    m.forget(&at("k2", "h"));
    assert_eq!(m.oldest(), Some(&at("k1", "h")));
    assert_eq!(m.len(), 1);
    assert_eq!(m.groups(), 1);
}

#[test]
fn a_later_request_moves_the_group_back() {
    let mut m = Memory::default();
    m.remember(at("k1", "h"), r("a", 1, 1, 0), B);
    m.remember(at("k2", "h"), r("b", 1, 1, 10), B);
    m.remember(at("k1", "h"), r("c", 1, 1, 20), B);
    assert_eq!(m.oldest(), Some(&at("k2", "h")));
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

proptest! {
    /// Against a model: every remembered id is found until forgotten, the
    /// count matches, and no group holds more than `per_holder`.
    #[test]
    fn matches_a_model(ops in prop::collection::vec((0u8..3, 0u8..3, 0u8..6, 0u8..4), 1..200)) {
        let mut m = Memory::default();
        let mut model: Vec<(Address, Vec<Box<[u8]>>)> = Vec::new();
        for (i, (k, h, id, op)) in ops.into_iter().enumerate() {
            let a = at(&k.to_string(), &h.to_string());
            let id_s = id.to_string();
            let pos = model.iter().position(|(x, _)| *x == a);
            match op {
                0 => {
                    m.forget(&a);
                    if let Some(p) = pos { model.remove(p); }
                }
                1 => {
                    m.forget_id(&a, id_s.as_bytes());
                    if let Some(p) = pos {
                        model[p].1.retain(|x| **x != *id_s.as_bytes());
                        if model[p].1.is_empty() { model.remove(p); }
                    }
                }
                _ => {
                    m.remember(a.clone(), r(&id_s, 1, i as i64, i as i64), B);
                    let p = pos.unwrap_or_else(|| { model.push((a.clone(), Vec::new())); model.len() - 1 });
                    let ids = &mut model[p].1;
                    ids.retain(|x| **x != *id_s.as_bytes());
                    ids.push(id_s.as_bytes().into());
                    while ids.len() > B.per_holder { ids.remove(0); }
                }
            }
            let total: usize = model.iter().map(|(_, v)| v.len()).sum();
            prop_assert_eq!(m.len(), total);
            prop_assert_eq!(m.groups(), model.len());
            for (a, ids) in &model {
                for x in ids {
                    prop_assert!(matches!(m.find(a, x, 1), Found::Replay(_)));
                }
            }
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
            block: Some(7)
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
