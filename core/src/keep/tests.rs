use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// Test leases: a name whose key is its first letter; a number whose key
/// is its half (two holders per key).
impl OnKey for &str {
    type Key = u8;
    fn on_key(&self) -> u8 {
        self.as_bytes().first().copied().unwrap_or(0)
    }
}

impl OnKey for u8 {
    type Key = u8;
    fn on_key(&self) -> u8 {
        *self / 2
    }
}

#[test]
fn latest_binding_wins_and_clients_drop_their_own() {
    let mut b: Bindings<&str, ()> = Bindings::default();
    assert!(b.bind("k", 1, 300, ()).is_none());
    b.bind("j", 1, 300, ());
    let before = b.bind("k", 2, 900, ());
    assert_eq!(before.map(|x| (x.client, x.ttl_ms)), Some((1, 300)));
    assert_eq!(b.len(), 2);
    assert_eq!(
        b.binding(&"k").map(|x| (x.client, x.ttl_ms)),
        Some((2, 900))
    );
    let mut clients: Vec<u64> = b.clients().collect();
    clients.sort();
    assert_eq!(clients, vec![1, 2]);
    let ended = b.drop_client(1);
    assert_eq!(ended.len(), 1, "only j was still bound to client 1");
    assert_eq!((*ended[0].0, ended[0].1.ttl_ms), ("j", 300));
    assert!(b.is_bound(&"k") && !b.is_bound(&"j"));
    assert!(b.unbind(&"k").is_some());
    assert!(b.is_empty() && b.clients().next().is_none());
}

proptest! {
    /// Whatever is bound, unbound and dropped, the indexes agree with a
    /// plain map of live bindings.
    #[test]
    fn indexes_agree(ops in proptest::collection::vec((0u8..6, 0u8..6, 0u64..3, 1i64..100), 1..200)) {
        let mut b: Bindings<u8, ()> = Bindings::default();
        let mut model: HashMap<u8, (u64, i64)> = HashMap::new();
        for (op, lease, client, ttl) in ops {
            match op {
                0 | 1 => {
                    let before = b.bind(lease, client, ttl, ()).map(|x| (x.client, x.ttl_ms));
                    prop_assert_eq!(before, model.insert(lease, (client, ttl)));
                }
                2 => { prop_assert_eq!(b.unbind(&lease).is_some(), model.remove(&lease).is_some()); }
                3 => {
                    // The key went: both of its leases end, nothing else.
                    let n = b.drop_key(&(lease / 2));
                    let before = model.len();
                    model.retain(|l, _| l / 2 != lease / 2);
                    prop_assert_eq!(n, before - model.len());
                    prop_assert!(b.on(&(lease / 2)).is_empty());
                }
                4 => {
                    let n = b.drop_keys(|k| *k == lease / 2 || *k == 0);
                    let before = model.len();
                    model.retain(|l, _| l / 2 != lease / 2 && l / 2 != 0);
                    prop_assert_eq!(n, before - model.len());
                }
                _ => {
                    let n = b.drop_client(client).len();
                    let before = model.len();
                    model.retain(|_, (c, _)| *c != client);
                    prop_assert_eq!(n, before - model.len());
                }
            }
            prop_assert_eq!(b.len(), model.len());
            for (l, (c, t)) in &model {
                prop_assert_eq!(b.binding(l).map(|x| (x.client, x.ttl_ms)), Some((*c, *t)));
            }
            let mut clients: Vec<u64> = b.clients().collect();
            clients.sort();
            let mut want: Vec<u64> = model.values().map(|(c, _)| *c).collect();
            want.sort();
            want.dedup();
            prop_assert_eq!(clients, want);
            for k in 0u8..3 {
                let mut on: Vec<u8> = b.on(&k).iter().map(|l| **l).collect();
                on.sort();
                let mut want: Vec<u8> = model.keys().copied().filter(|l| l / 2 == k).collect();
                want.sort();
                prop_assert_eq!(on, want);
            }
        }
    }
}

#[test]
fn kept_deadlines_carry_their_ttl() {
    let d = kept_deadline(3_000);
    assert!(d > KEPT_BASE && d <= crate::bounds::MAX_DEADLINE_MS);
    assert_eq!(kept_ttl(d), Some(3_000));
    assert_eq!(kept_ttl(1_700_000_000_000), None);
    assert_eq!(kept_ttl(KEPT_BASE), None);
    assert_eq!(
        kept_ttl(crate::bounds::MAX_DEADLINE_MS),
        None,
        "past every ttl: real"
    );
    assert_eq!(ttl_left(d, 1_700_000_000_000), 3_000);
    assert_eq!(ttl_left(1_700_000_000_500, 1_700_000_000_000), 500);
    assert_eq!(ttl_left(1_700_000_000_000, 1_700_000_000_500), 0);
    let max = kept_deadline(crate::settings::MAX_TTL_MS.max);
    assert!(max <= crate::bounds::MAX_DEADLINE_MS);
    let holders = [(&b"a"[..], d), (&b"b"[..], 5)];
    assert_eq!(kept_of(holders.into_iter()), vec![(b"a".to_vec(), 3_000)]);
}
