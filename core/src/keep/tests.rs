use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

#[test]
fn renews_every_third_of_the_ttl() {
    let mut b: Bindings<&str, ()> = Bindings::default();
    let id = b.bind("k", 7, 300, 1000, ());
    assert_eq!(b.next_due(), Some(1100));
    assert!(b.due(1099, 10).is_empty());
    assert_eq!(b.due(1100, 10), vec![id]);
    b.renewed(id, 1100);
    assert_eq!(b.next_due(), Some(1200));
    assert_eq!(interval(1), 1);
}

#[test]
fn latest_binding_wins_and_disconnect_drops() {
    let mut b: Bindings<&str, ()> = Bindings::default();
    b.bind("k", 1, 300, 0, ());
    b.bind("j", 1, 300, 0, ());
    let moved = b.bind("k", 2, 900, 0, ());
    assert_eq!(b.len(), 2);
    assert_eq!(
        b.get(moved).map(|(_, x)| (x.client, x.ttl_ms)),
        Some((2, 900))
    );
    let ended = b.drop_client(1);
    assert_eq!(ended.len(), 1, "only j was still bound to client 1");
    assert_eq!((*ended[0].0, ended[0].1.ttl_ms), ("j", 300));
    assert_eq!(b.binding(&"k").map(|x| x.ttl_ms), Some(900));
    assert_eq!(b.all().count(), 1);
    assert!(b.is_bound(&"k") && !b.is_bound(&"j"));
    assert!(b.unbind(&"k").is_some());
    assert!(b.is_empty() && b.next_due().is_none());
}

#[test]
fn due_is_bounded() {
    let mut b: Bindings<u32, ()> = Bindings::default();
    for k in 0..100 {
        b.bind(k, 1, 30, 0, ());
    }
    assert_eq!(b.due(10, 40).len(), 40);
    let id = b.due(10, 1)[0];
    b.postpone(id, 50);
    assert_eq!(b.due(10, 1000).len(), 99);
}

proptest! {
    /// Whatever is bound, unbound, dropped and renewed, the indexes agree
    /// with a plain list of live bindings.
    #[test]
    fn indexes_agree(ops in proptest::collection::vec((0u8..5, 0u8..6, 0u64..3, 1i64..100), 1..200)) {
        let mut b: Bindings<u8, ()> = Bindings::default();
        let mut model: HashMap<u8, (u64, i64)> = HashMap::new();
        let mut now = 0;
        for (op, lease, client, ttl) in ops {
            match op {
                0 | 1 => { b.bind(lease, client, ttl, now, ()); model.insert(lease, (client, now + interval(ttl))); }
                2 => { prop_assert_eq!(b.unbind(&lease).is_some(), model.remove(&lease).is_some()); }
                3 => {
                    let n = b.drop_client(client).len();
                    let before = model.len();
                    model.retain(|_, (c, _)| *c != client);
                    prop_assert_eq!(n, before - model.len());
                }
                _ => {
                    now += ttl;
                    for id in b.due(now, usize::MAX) {
                        let (lease, x) = b.get(id).map(|(l, x)| (**l, x.ttl_ms)).unwrap();
                        b.renewed(id, now);
                        model.get_mut(&lease).unwrap().1 = now + interval(x);
                    }
                }
            }
            prop_assert_eq!(b.len(), model.len());
            prop_assert_eq!(b.due.len(), model.len());
            prop_assert_eq!(b.by_lease.len(), model.len());
            prop_assert_eq!(b.by_client.values().map(Set::len).sum::<usize>(), model.len());
            prop_assert_eq!(b.next_due(), model.values().map(|(_, at)| *at).min());
        }
    }
}

#[test]
fn kept_deadlines_carry_their_ttl() {
    let d = kept_deadline(3_000);
    assert!(d > KEPT_BASE && d <= crate::bounds::MAX_DEADLINE_MS);
    assert_eq!(kept_ttl(d), Some(3_000));
    assert_eq!(kept_ttl(1_700_000_000_000), None);
    assert_eq!(ttl_left(d, 1_700_000_000_000), 3_000);
    assert_eq!(ttl_left(1_700_000_000_500, 1_700_000_000_000), 500);
    assert_eq!(ttl_left(1_700_000_000_000, 1_700_000_000_500), 0);
    let max = kept_deadline(crate::settings::MAX_TTL_MS.max);
    assert!(max <= crate::bounds::MAX_DEADLINE_MS);
    let holders = [(&b"a"[..], d), (&b"b"[..], 5)];
    assert_eq!(kept_of(holders.into_iter()), vec![(b"a".to_vec(), 3_000)]);
}
