//! Holders with a lease each, inside one key (semaphores, read-write
//! locks): who holds what, and whose lease ends first, kept in step here so
//! that each kind only says what a holder holds.
//!
//! Most keys have one holder, kept inline; a few holders live in one small
//! vector sorted by name, and deadlines are found by a scan (no tree nodes
//! to allocate on every new key). Past `FEW` holders the key moves to a map and a deadline
//! index, which share each holder's name (`Rc`: values are created, copied
//! and freed on Redis' main thread only; padlock's types set no
//! `free_effort`, so Redis never frees them lazily in a thread).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// What a kind keeps per holder; the index needs its deadline.
pub trait Leased: Copy {
    fn deadline_ms(&self) -> i64;
}

/// Holders kept in the small form; one more and the key moves to the map.
const FEW: usize = 8;

/// A holder's name and entry, in the small forms.
type Slot<E> = (Rc<[u8]>, E);

#[derive(Debug, Clone)]
enum Repr<E> {
    /// None or one holder (most keys): no allocation but the name.
    One(Option<Slot<E>>),
    Few(Vec<Slot<E>>),
    Many {
        holders: BTreeMap<Rc<[u8]>, E>,
        /// (deadline, holder) for every holder: earliest first, for expiry.
        by_deadline: BTreeSet<(i64, Rc<[u8]>)>,
    },
}

#[derive(Debug, Clone)]
pub struct Leases<E> {
    repr: Repr<E>,
}

impl<E> Default for Leases<E> {
    fn default() -> Self {
        Leases {
            repr: Repr::One(None),
        }
    }
}

/// Equal holders with equal entries, whichever form each side is in.
impl<E: Leased + PartialEq> PartialEq for Leases<E> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<E: Leased + Eq> Eq for Leases<E> {}

/// One of two iterators (the two forms).
enum Either<A, B> {
    A(A),
    B(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            Either::A(a) => a.next(),
            Either::B(b) => b.next(),
        }
    }
}

impl<E: Leased> Leases<E> {
    /// The holders of the small forms, sorted by name.
    fn few(&self) -> Option<&[Slot<E>]> {
        match &self.repr {
            Repr::One(one) => Some(one.as_slice()),
            Repr::Few(v) => Some(v),
            Repr::Many { .. } => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match (&self.repr, self.few()) {
            (_, Some(v)) => v.len(),
            (Repr::Many { holders, .. }, None) => holders.len(),
            _ => 0,
        }
    }

    pub fn get(&self, holder: &[u8]) -> Option<E> {
        match (&self.repr, self.few()) {
            (_, Some(v)) => v
                .binary_search_by(|(h, _)| (**h).cmp(holder))
                .ok()
                .map(|i| v[i].1),
            (Repr::Many { holders, .. }, None) => holders.get(holder).copied(),
            _ => None,
        }
    }

    /// Every holder, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], E)> {
        match (&self.repr, self.few()) {
            (Repr::Many { holders, .. }, None) => {
                Either::B(holders.iter().map(|(h, e)| (&**h, *e)))
            }
            (_, v) => Either::A(v.unwrap_or(&[]).iter().map(|(h, e)| (&**h, *e))),
        }
    }

    /// Sets the holder's entry (None: the holder leaves); the old one.
    pub fn set(&mut self, holder: &[u8], entry: Option<E>) -> Option<E> {
        if let Repr::One(one) = &mut self.repr {
            match (one.take(), entry) {
                (None, None) => return None,
                (None, Some(e)) => {
                    *one = Some((Rc::from(holder), e));
                    return None;
                }
                (Some((h, old)), new) if *h == *holder => {
                    *one = new.map(|e| (h, e));
                    return Some(old);
                }
                (Some(other), None) => {
                    *one = Some(other);
                    return None;
                }
                (Some(other), Some(_)) => self.repr = Repr::Few(vec![other]),
            }
        }
        if let (Repr::Few(v), Some(_)) = (&self.repr, entry) {
            if v.len() >= FEW && self.get(holder).is_none() {
                self.grow();
            }
        }
        match &mut self.repr {
            Repr::One(_) => None,
            Repr::Few(v) => match (v.binary_search_by(|(h, _)| (**h).cmp(holder)), entry) {
                (Ok(i), Some(e)) => Some(std::mem::replace(&mut v[i].1, e)),
                (Ok(i), None) => Some(v.remove(i).1),
                (Err(i), Some(e)) => {
                    v.insert(i, (Rc::from(holder), e));
                    None
                }
                (Err(_), None) => None,
            },
            Repr::Many {
                holders,
                by_deadline,
            } => {
                let (name, old) = match holders.remove_entry(holder) {
                    Some((name, o)) => {
                        let indexed = (o.deadline_ms(), name);
                        by_deadline.remove(&indexed);
                        (indexed.1, Some(o))
                    }
                    None if entry.is_some() => (Rc::from(holder), None),
                    None => return None,
                };
                if let Some(e) = entry {
                    by_deadline.insert((e.deadline_ms(), Rc::clone(&name)));
                    holders.insert(name, e);
                }
                old
            }
        }
    }

    /// From the small form to the map and its index.
    fn grow(&mut self) {
        if let Repr::Few(v) = &mut self.repr {
            let few = std::mem::take(v);
            let by_deadline = few
                .iter()
                .map(|(h, e)| (e.deadline_ms(), Rc::clone(h)))
                .collect();
            self.repr = Repr::Many {
                holders: few.into_iter().collect(),
                by_deadline,
            };
        }
    }

    /// Holders whose lease ended by `now_ms`, earliest first.
    pub fn ended(&self, now_ms: i64) -> Vec<&[u8]> {
        match (&self.repr, self.few()) {
            (_, Some(v)) => {
                let mut due: Vec<(i64, &[u8])> = v
                    .iter()
                    .filter(|(_, e)| e.deadline_ms() <= now_ms)
                    .map(|(h, e)| (e.deadline_ms(), &**h))
                    .collect();
                due.sort_unstable();
                due.into_iter().map(|(_, h)| h).collect()
            }
            (Repr::Many { by_deadline, .. }, None) => by_deadline
                .iter()
                .take_while(|(deadline, _)| *deadline <= now_ms)
                .map(|(_, h)| &**h)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Holders whose lease still runs at `now_ms`.
    pub fn live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], E)> {
        self.iter().filter(move |(_, e)| e.deadline_ms() > now_ms)
    }

    /// The key's expiry: the latest holder deadline.
    pub fn latest_deadline(&self) -> Option<i64> {
        match (&self.repr, self.few()) {
            (_, Some(v)) => v.iter().map(|(_, e)| e.deadline_ms()).max(),
            (Repr::Many { by_deadline, .. }, None) => {
                by_deadline.iter().next_back().map(|(d, _)| *d)
            }
            _ => None,
        }
    }

    /// When a lease next runs out by itself.
    pub fn earliest_deadline(&self) -> Option<i64> {
        match (&self.repr, self.few()) {
            (_, Some(v)) => v.iter().map(|(_, e)| e.deadline_ms()).min(),
            (Repr::Many { by_deadline, .. }, None) => by_deadline.iter().next().map(|(d, _)| *d),
            _ => None,
        }
    }

    /// Heap bytes of the holders, for `MEMORY USAGE`: each name once (with
    /// its `Rc` counts), plus the small form's slots, or `tree_entry` per
    /// holder in the map form (its two tree entries and their share of
    /// half-full nodes, measured by the kind).
    pub fn heap_bytes(&self, tree_entry: usize) -> usize {
        let names: usize = self
            .iter()
            .map(|(h, _)| (16 + h.len()).next_multiple_of(8))
            .sum();
        names
            + match &self.repr {
                Repr::One(_) => 0,
                Repr::Few(v) => v.capacity() * std::mem::size_of::<Slot<E>>(),
                Repr::Many { holders, .. } => holders.len() * tree_entry,
            }
    }

    /// The form's own rules hold (for property tests): names sorted and
    /// unique in the small form, the index mirroring the map in the other.
    #[cfg(test)]
    pub fn consistent(&self) -> bool {
        match &self.repr {
            Repr::One(_) => true,
            Repr::Few(v) => v.len() <= FEW && v.windows(2).all(|w| w[0].0 < w[1].0),
            Repr::Many {
                holders,
                by_deadline,
            } => {
                by_deadline.len() == holders.len()
                    && by_deadline
                        .iter()
                        .all(|(d, h)| holders.get(h).is_some_and(|e| e.deadline_ms() == *d))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct D(i64);

    impl Leased for D {
        fn deadline_ms(&self) -> i64 {
            self.0
        }
    }

    proptest! {
        /// Both forms answer like a plain map, through growth.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..20, proptest::option::of(0i64..50)), 0..120), now in 0i64..50) {
            let mut l = Leases::<D>::default();
            let mut model = BTreeMap::<Vec<u8>, i64>::new();
            for (h, d) in ops {
                let name = vec![b'h', h];
                let old = l.set(&name, d.map(D));
                let model_old = match d {
                    Some(d) => model.insert(name, d),
                    None => model.remove(&name),
                };
                prop_assert_eq!(old.map(|e| e.0), model_old);
                prop_assert!(l.consistent());
            }
            prop_assert_eq!(l.len(), model.len());
            prop_assert!(l.iter().map(|(h, e)| (h.to_vec(), e.0)).eq(model.clone()));
            prop_assert_eq!(l.latest_deadline(), model.values().max().copied());
            prop_assert_eq!(l.earliest_deadline(), model.values().min().copied());
            let mut ended: Vec<(i64, Vec<u8>)> = model.iter().filter(|(_, d)| **d <= now).map(|(h, d)| (*d, h.clone())).collect();
            ended.sort();
            let got: Vec<Vec<u8>> = l.ended(now).into_iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, ended.into_iter().map(|(_, h)| h).collect::<Vec<_>>());
        }
    }
}
