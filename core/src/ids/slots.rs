//! The two small containers of the request-id memory, each holding its
//! common case inline: a key's holders (a lock has one) and a group's ids
//! (a holder usually sends one request per hold, then its release). A
//! remembered request then costs no allocation of a container of its own,
//! only of its strings.

use std::collections::VecDeque;

use super::super::hash::Map;
use std::collections::hash_map::Entry;

use super::names::{HolderPart, Names};

/// The groups of one key, by holder: one inline until a second holder comes.
#[derive(Debug)]
pub enum Holders<G> {
    One(HolderPart, G),
    Many(Map<HolderPart, G>),
}

impl<G: Default> Holders<G> {
    pub fn new(holder: HolderPart) -> Self {
        Holders::One(holder, G::default())
    }

    pub fn get(&self, holder: &[u8]) -> Option<&G> {
        match self {
            Holders::One(h, g) => (h.0.holder() == holder).then_some(g),
            Holders::Many(m) => m.get(holder),
        }
    }

    /// The holder's group with the holder's shared names.
    pub fn get_named(&self, holder: &[u8]) -> Option<(&HolderPart, &G)> {
        match self {
            Holders::One(h, g) => (h.0.holder() == holder).then_some((h, g)),
            Holders::Many(m) => m.get_key_value(holder),
        }
    }

    pub fn get_mut(&mut self, holder: &[u8]) -> Option<&mut G> {
        match self {
            Holders::One(h, g) => (h.0.holder() == holder).then_some(g),
            Holders::Many(m) => m.get_mut(holder),
        }
    }

    /// The holder's group, made if new (and then `true`); `names` are its
    /// key's and holder's, shared with the group when it is new.
    pub fn entry(&mut self, names: &Names) -> (&mut G, bool) {
        if let Holders::One(h, _) = self {
            if h.0.holder() != names.holder() {
                let Holders::One(h, g) = std::mem::replace(self, Holders::Many(Map::default()))
                else {
                    unreachable!("matched One above")
                };
                if let Holders::Many(m) = self {
                    m.insert(h, g);
                }
            }
        }
        match self {
            Holders::One(_, g) => (g, false),
            Holders::Many(m) => match m.entry(HolderPart(names.clone())) {
                Entry::Occupied(o) => (o.into_mut(), false),
                Entry::Vacant(v) => (v.insert(G::default()), true),
            },
        }
    }

    /// Takes the holder's group out; `true` beside it when none is left.
    pub fn remove(&mut self, holder: &[u8]) -> (Option<G>, bool) {
        match self {
            Holders::One(h, _) if h.0.holder() == holder => {
                let Holders::One(_, g) = std::mem::replace(self, Holders::Many(Map::default()))
                else {
                    unreachable!("matched One above")
                };
                (Some(g), true)
            }
            Holders::One(..) => (None, false),
            Holders::Many(m) => {
                let g = m.remove(holder);
                (g, m.is_empty())
            }
        }
    }

    pub fn iter(&self) -> Box<dyn Iterator<Item = (&HolderPart, &G)> + '_> {
        match self {
            Holders::One(h, g) => Box::new(std::iter::once((h, g))),
            Holders::Many(m) => Box::new(m.iter()),
        }
    }
}

/// A group's ids, oldest first: the first two inline (a hold's acquire
/// and its release, what a client sends with ids).
#[derive(Debug, Default)]
pub enum Recent<T> {
    #[default]
    None,
    One(T),
    Two(T, T),
    Many(VecDeque<T>),
}

impl<T> Recent<T> {
    pub fn len(&self) -> usize {
        match self {
            Recent::None => 0,
            Recent::One(_) => 1,
            Recent::Two(..) => 2,
            Recent::Many(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        let (a, b, many) = match self {
            Recent::None => (None, None, None),
            Recent::One(t) => (Some(t), None, None),
            Recent::Two(t, u) => (Some(t), Some(u), None),
            Recent::Many(v) => (None, None, Some(v.iter())),
        };
        a.into_iter().chain(b).chain(many.into_iter().flatten())
    }

    pub fn push_back(&mut self, t: T) {
        // The common cases in place: taking the whole container out and
        // back moved both inline slots.
        let t = match self {
            Recent::None => {
                *self = Recent::One(t);
                return;
            }
            Recent::Many(v) => {
                v.push_back(t);
                return;
            }
            _ => t,
        };
        *self = match std::mem::take(self) {
            Recent::None => Recent::One(t),
            Recent::One(a) => Recent::Two(a, t),
            Recent::Two(a, b) => Recent::Many(VecDeque::from([a, b, t])),
            Recent::Many(mut v) => {
                v.push_back(t);
                Recent::Many(v)
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let (first, rest) = match std::mem::take(self) {
            Recent::None => (None, Recent::None),
            Recent::One(t) => (Some(t), Recent::None),
            Recent::Two(a, b) => (Some(a), Recent::One(b)),
            Recent::Many(mut v) => (v.pop_front(), Recent::Many(v)),
        };
        *self = rest;
        first
    }

    /// Removes the first element that `f` picks.
    pub fn remove_where(&mut self, f: impl Fn(&T) -> bool) -> Option<T> {
        match self {
            Recent::None => None,
            Recent::One(t) | Recent::Two(t, _) if f(t) => self.pop_front(),
            Recent::One(_) => None,
            Recent::Two(_, u) if f(u) => {
                let Recent::Two(a, b) = std::mem::take(self) else {
                    unreachable!("matched Two above")
                };
                *self = Recent::One(a);
                Some(b)
            }
            Recent::Two(..) => None,
            Recent::Many(v) => {
                let i = v.iter().position(f)?;
                v.remove(i)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    proptest::proptest! {
        /// Against a plain list: pushes, pops and removals keep the same
        /// items in the same order, whichever form holds them.
        #[test]
        fn recent_matches_a_list(ops in proptest::collection::vec((0u8..3, 0u8..6), 1..60)) {
            let mut r = Recent::default();
            let mut model: Vec<u8> = Vec::new();
            for (op, v) in ops {
                match op {
                    0 => { r.push_back(v); model.push(v); }
                    1 => {
                        let want = (!model.is_empty()).then(|| model.remove(0));
                        proptest::prop_assert_eq!(r.pop_front(), want);
                    }
                    _ => {
                        let want = model.iter().position(|x| *x == v).map(|i| model.remove(i));
                        proptest::prop_assert_eq!(r.remove_where(|x| *x == v), want);
                    }
                }
                proptest::prop_assert_eq!(r.len(), model.len());
                proptest::prop_assert_eq!(r.iter().copied().collect::<Vec<_>>(), model.clone());
                proptest::prop_assert_eq!(r.iter().rev().copied().collect::<Vec<_>>(),
                    model.iter().rev().copied().collect::<Vec<_>>());
            }
        }
    }
}
