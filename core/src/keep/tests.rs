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
                    let n = b.drop_key(&(lease / 2)).len();
                    let before = model.len();
                    model.retain(|l, _| l / 2 != lease / 2);
                    prop_assert_eq!(n, before - model.len());
                    prop_assert!(b.on(&(lease / 2)).is_empty());
                }
                4 => {
                    let n = b.drop_keys(|k| *k == lease / 2 || *k == 0).len();
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

/// A lease as the glue names it: (database, key, holder), on key
/// (database, key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct At(u8, u8, u8);

impl OnKey for At {
    type Key = (u8, u8);
    fn on_key(&self) -> (u8, u8) {
        (self.0, self.1)
    }
}

/// One lock as the model stores it: its holder, the hold it is (a fence),
/// and whether its lease is held far away.
#[derive(Debug, Clone, Copy)]
struct Held {
    holder: u8,
    hold: u64,
    far: bool,
}

proptest! {
    /// The KEEP invariant over random acquires (with and without KEEP),
    /// releases, removals, renames, database swaps, connection closes and
    /// restarts, with the glue's rules: a lease is written far away when a
    /// binding of that very hold (its fence) exists; every removal or move
    /// away ends the bindings on the key; a closed connection's bindings
    /// give their hold (if it is still there) a real deadline; whatever
    /// reaches a place, or a server, with no binding for it is thawed.
    /// After every step: a lease held far away has a live binding of
    /// exactly that hold.
    #[test]
    fn a_lease_is_far_only_while_a_live_binding_keeps_that_hold(
        ops in proptest::collection::vec((0u8..8, 0u8..2, 0u8..3, 0u8..2, 0u8..3, any::<bool>()), 1..120)
    ) {
        let mut keys: HashMap<(u8, u8), Held> = HashMap::new();
        let mut b: Bindings<At, u64> = Bindings::default();
        let mut fence = 0u64;
        let thaw = |keys: &mut HashMap<(u8, u8), Held>, b: &Bindings<At, u64>| {
            for ((db, k), v) in keys.iter_mut() {
                let kept = b.binding(&At(*db, *k, v.holder)).is_some_and(|x| x.payload == v.hold);
                v.far &= kept;
            }
        };
        for (op, db, k, holder, client, keep) in ops {
            let client = u64::from(client);
            match op {
                0..=2 => {
                    // LOCK.ACQUIRE key holder ttl [KEEP] on `client`.
                    let cur = keys.get(&(db, k)).copied();
                    let hold = match cur {
                        None => { fence += 1; fence }
                        Some(v) if v.holder == holder => v.hold,
                        Some(_) => continue,
                    };
                    let lease = At(db, k, holder);
                    let bound = b.binding(&lease).is_some_and(|x| x.payload == hold);
                    if keep {
                        b.bind(lease, client, 300, hold);
                    }
                    keys.insert((db, k), Held { holder, hold, far: keep || bound });
                }
                3 => {
                    // LOCK.RELEASE to 0: the key goes, the binding ends.
                    if let Some(v) = keys.remove(&(db, k)) {
                        b.unbind(&At(db, k, v.holder));
                    }
                    b.drop_key(&(db, k));
                }
                4 => {
                    // DEL / FLUSH / eviction of one key.
                    keys.remove(&(db, k));
                    b.drop_key(&(db, k));
                }
                5 => {
                    // RENAME k -> (k+1) % 3 in db (dst replaced, src gone).
                    let dst = (k + 1) % 3;
                    if let Some(v) = keys.remove(&(db, k)) {
                        b.drop_key(&(db, dst));
                        b.drop_key(&(db, k));
                        keys.insert((db, dst), v);
                        thaw(&mut keys, &b);
                    }
                }
                6 => {
                    // SWAPDB 0 1.
                    keys = keys.into_iter().map(|((d, k), v)| ((1 - d, k), v)).collect();
                    b.drop_keys(|_| true);
                    thaw(&mut keys, &b);
                }
                _ => {
                    if keep {
                        // A restart: bindings are not persisted.
                        b.clear();
                        thaw(&mut keys, &b);
                    } else {
                        // The connection closes: each hold still there gets
                        // a real deadline (its fence must match).
                        for (lease, x) in b.drop_client(client) {
                            if let Some(v) = keys.get_mut(&(lease.0, lease.1)) {
                                if v.holder == lease.2 && v.hold == x.payload {
                                    v.far = false;
                                }
                            }
                        }
                    }
                }
            }
            for ((db, k), v) in &keys {
                // And the other half: a live binding of the hold keeps it.
                for lease in b.on(&(*db, *k)) {
                    let x = b.binding(&lease).map(|x| x.payload);
                    if lease.2 == v.holder && x == Some(v.hold) {
                        prop_assert!(v.far, "lease {:?} bound yet not kept", (db, k));
                    }
                }
                if v.far {
                    let x = b.binding(&At(*db, *k, v.holder));
                    prop_assert!(x.is_some_and(|x| x.payload == v.hold),
                        "lease {:?} held far away without a binding of its hold", (db, k));
                }
            }
        }
    }
}
