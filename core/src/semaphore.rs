//! Counting semaphores with a lease per holder, all inside one key.
//!
//! Every holder has its own deadline on the server's clock; `expire` takes
//! the permits of holders whose deadline passed back into the pool. The key's
//! own expiry is kept at the latest holder deadline (the glue does that with
//! `latest_deadline`), so an abandoned semaphore disappears by itself.
//!
//! Like the lock rules, these decide on a borrowed semaphore and return an
//! `Effect`: one holder's new state. The glue applies it (`apply`), stores
//! the key to match and replicates exactly the effect, which is also what
//! replicas and the AOF apply, so nothing is ever decided twice. A refused
//! request returns no effect and so changes nothing.

use super::error::Error;
use super::leases::{self, Leases};
use super::since::Since;
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub permits: u64,
    pub deadline_ms: i64,
    /// When this holder's hold began (unix ms, this server's clock), for
    /// the hold percentiles; 0 where unknown. Not stored or replicated.
    pub since: Since,
}

impl leases::Leased for Entry {
    fn deadline_ms(&self) -> i64 {
        self.deadline_ms
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Semaphore {
    limit: u64,
    used: u64,
    holders: Leases<Entry>,
    /// Re-created by `SEM.EXTEND` during the restart grace: the limit is
    /// the permits re-created so far, until a `SEM.ACQUIRE` sets it.
    recreated: bool,
}

/// One holder's new state (permits 0: the holder leaves), with the limit
/// in force after the change.
/// The holder is borrowed from the request where it can be (no copy on the
/// hot path); removals found by `expire` own theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect<'h> {
    pub holder: Cow<'h, [u8]>,
    pub limit: u64,
    pub permits: u64,
    pub deadline_ms: i64,
    /// Sets the re-created mark (None leaves it).
    pub recreated: Option<bool>,
    /// When the holder's hold began, as the rules carry it over (now for
    /// a holder new to the key); 0 from the replication stream (unknown).
    pub since: Since,
}

impl<'h> Effect<'h> {
    /// An effect as replicas and the AOF carry it (`PADLOCK.SEMSET`).
    pub fn set(holder: &'h [u8], limit: u64, permits: u64, deadline_ms: i64) -> Effect<'h> {
        Effect {
            holder: Cow::Borrowed(holder),
            limit,
            permits,
            deadline_ms,
            recreated: None,
            since: Since::UNKNOWN,
        }
    }
}

/// What `SEM.INFO` shows: only holders whose lease is still running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub limit: u64,
    pub used: u64,
    pub available: u64,
    /// (holder, permits, ms left)
    pub holders: Vec<(Vec<u8>, u64, i64)>,
}

impl Semaphore {
    pub fn new(limit: u64) -> Self {
        Semaphore {
            limit,
            ..Default::default()
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    pub fn len(&self) -> usize {
        self.holders.len()
    }

    pub fn holder(&self, holder: &[u8]) -> Option<Entry> {
        self.holders.get(holder)
    }

    pub fn holders(&self) -> impl Iterator<Item = (&[u8], Entry)> {
        self.holders.iter()
    }

    /// Holders whose lease still runs at `now_ms`.
    pub fn live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], Entry)> {
        self.holders.live(now_ms)
    }

    /// Heap bytes of the holders (see `Leases::heap_bytes`).
    pub fn holders_heap_bytes(&self, tree_entry: usize) -> usize {
        self.holders.heap_bytes(tree_entry)
    }

    /// The key's expiry: the latest holder deadline.
    pub fn latest_deadline(&self) -> Option<i64> {
        self.holders.latest_deadline()
    }

    /// The earliest holder deadline: when permits next return by themselves.
    pub fn earliest_deadline(&self) -> Option<i64> {
        self.holders.earliest_deadline()
    }

    /// Applies an effect decided here or received from the master.
    /// Returns the holder's entry when the effect ended its hold.
    pub fn apply(&mut self, e: &Effect) -> Option<Entry> {
        self.limit = e.limit;
        let ended = self.set_holder(&e.holder, e.permits, e.deadline_ms, e.since);
        if let Some(r) = e.recreated {
            self.recreated = r;
        }
        ended
    }

    pub(crate) fn set_holder(
        &mut self,
        holder: &[u8],
        permits: u64,
        deadline_ms: i64,
        since: Since,
    ) -> Option<Entry> {
        let entry = (permits > 0).then_some(Entry {
            permits,
            deadline_ms,
            since,
        });
        let old = self.holders.set(holder, entry);
        if let Some(old) = old {
            self.used -= old.permits;
        }
        self.used += permits;
        old.filter(|_| permits == 0)
    }

    /// Holders whose lease ended by `now_ms`, as effects that remove them.
    pub fn expire(&self, now_ms: i64) -> Vec<Effect<'static>> {
        self.holders
            .ended(now_ms)
            .into_iter()
            .map(|h| Effect {
                holder: Cow::Owned(h.to_vec()),
                limit: self.limit,
                permits: 0,
                deadline_ms: 0,
                recreated: None,
                since: Since::UNKNOWN,
            })
            .collect()
    }

    pub fn fits(&self, limit: u64, permits: u64) -> bool {
        self.used + permits <= limit
    }

    /// Reply: the permits the holder then holds; None when they do not fit.
    pub fn acquire<'h>(
        &self,
        holder: &'h [u8],
        limit: u64,
        permits: u64,
        ttl_ms: i64,
        now_ms: i64,
    ) -> Option<(u64, Effect<'h>)> {
        if !self.fits(limit, permits) {
            return None;
        }
        let (had, since) = self
            .holder(holder)
            .map_or((0, Since::at(now_ms)), |e| (e.permits, e.since));
        let total = had + permits;
        let mut e = Effect::set(holder, limit, total, now_ms.saturating_add(ttl_ms));
        e.recreated = Some(false);
        e.since = since;
        Some((total, e))
    }

    /// Reply: the permits the holder still holds.
    pub fn release<'h>(
        &self,
        key: &[u8],
        holder: &'h [u8],
        permits: Option<u64>,
    ) -> Result<(u64, Effect<'h>), Error> {
        let e = self
            .holder(holder)
            .ok_or_else(|| Error::not_held(key, holder))?;
        let give = permits.unwrap_or(e.permits);
        if give > e.permits {
            return Err(Error::not_held(key, holder));
        }
        let left = e.permits - give;
        let mut next = Effect::set(holder, self.limit, left, e.deadline_ms);
        next.since = e.since;
        Ok((left, next))
    }

    pub fn extend<'h>(
        &self,
        key: &[u8],
        holder: &'h [u8],
        ttl_ms: i64,
        now_ms: i64,
    ) -> Result<Effect<'h>, Error> {
        let e = self
            .holder(holder)
            .ok_or_else(|| Error::not_held(key, holder))?;
        let deadline = now_ms.saturating_add(ttl_ms);
        let mut next = Effect::set(holder, self.limit, e.permits, deadline);
        next.since = e.since;
        Ok(next)
    }

    /// During a restart grace: the holder gets back the permits it believes
    /// it holds. A semaphore re-created from nothing has as its limit the
    /// permits re-created so far, until an acquire sets one.
    pub fn recreate<'h>(
        &self,
        holder: &'h [u8],
        permits: u64,
        ttl_ms: i64,
        now_ms: i64,
    ) -> Effect<'h> {
        let recreated = self.is_empty() || self.recreated;
        let (before, since) = self
            .holder(holder)
            .map_or((0, Since::at(now_ms)), |e| (e.permits, e.since));
        let used = self.used - before + permits;
        let limit = if recreated { used } else { self.limit };
        let mut e = Effect::set(holder, limit, permits, now_ms.saturating_add(ttl_ms));
        e.recreated = Some(recreated);
        e.since = since;
        e
    }

    pub fn view(&self, now_ms: i64) -> View {
        let holders: Vec<_> = self
            .holders
            .live(now_ms)
            .map(|(h, e)| {
                let ttl = super::keep::ttl_left(e.deadline_ms, now_ms);
                (h.to_vec(), e.permits, ttl)
            })
            .collect();
        let used = holders.iter().map(|h| h.1).sum::<u64>();
        View {
            limit: self.limit,
            used,
            available: self.limit.saturating_sub(used),
            holders,
        }
    }
}

pub mod args;
pub mod stored;

#[cfg(test)]
mod tests;
