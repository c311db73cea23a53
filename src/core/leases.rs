//! Holders with a lease each, inside one key (semaphores, read-write
//! locks): the holder map and the index of their deadlines, kept in step
//! here so that each kind only says what a holder holds.

use std::collections::{BTreeMap, BTreeSet};

/// What a kind keeps per holder; the index needs its deadline.
pub trait Leased: Copy {
    fn deadline_ms(&self) -> i64;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leases<E> {
    holders: BTreeMap<Box<[u8]>, E>,
    /// (deadline, holder) for every holder: earliest first, for expiry.
    by_deadline: BTreeSet<(i64, Box<[u8]>)>,
}

impl<E> Default for Leases<E> {
    fn default() -> Self {
        Leases {
            holders: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
        }
    }
}

impl<E: Leased> Leases<E> {
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    pub fn len(&self) -> usize {
        self.holders.len()
    }

    pub fn get(&self, holder: &[u8]) -> Option<E> {
        self.holders.get(holder).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], E)> {
        self.holders.iter().map(|(h, e)| (&**h, *e))
    }

    /// Sets the holder's entry (None: the holder leaves); the old one.
    pub fn set(&mut self, holder: &[u8], entry: Option<E>) -> Option<E> {
        let old = self.holders.remove(holder);
        if let Some(o) = &old {
            self.by_deadline.remove(&(o.deadline_ms(), holder.into()));
        }
        if let Some(e) = entry {
            self.holders.insert(holder.into(), e);
            self.by_deadline.insert((e.deadline_ms(), holder.into()));
        }
        old
    }

    /// Holders whose lease ended by `now_ms`, earliest first.
    pub fn ended(&self, now_ms: i64) -> impl Iterator<Item = &[u8]> {
        self.by_deadline
            .iter()
            .take_while(move |(deadline, _)| *deadline <= now_ms)
            .map(|(_, h)| &**h)
    }

    /// Holders whose lease still runs at `now_ms`.
    pub fn live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], E)> {
        self.iter().filter(move |(_, e)| e.deadline_ms() > now_ms)
    }

    /// The key's expiry: the latest holder deadline.
    pub fn latest_deadline(&self) -> Option<i64> {
        self.by_deadline.iter().next_back().map(|(d, _)| *d)
    }

    /// When a lease next runs out by itself.
    pub fn earliest_deadline(&self) -> Option<i64> {
        self.by_deadline.iter().next().map(|(d, _)| *d)
    }

    /// The index mirrors the holders (for property tests).
    pub fn consistent(&self) -> bool {
        self.by_deadline.len() == self.holders.len()
            && self
                .by_deadline
                .iter()
                .all(|(d, h)| self.holders.get(h).is_some_and(|e| e.deadline_ms() == *d))
    }
}
