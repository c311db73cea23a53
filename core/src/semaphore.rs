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
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub permits: u64,
    pub deadline_ms: i64,
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
    pub fn apply(&mut self, e: &Effect) {
        self.limit = e.limit;
        self.set_holder(&e.holder, e.permits, e.deadline_ms);
        if let Some(r) = e.recreated {
            self.recreated = r;
        }
    }

    pub(crate) fn set_holder(&mut self, holder: &[u8], permits: u64, deadline_ms: i64) {
        let entry = (permits > 0).then_some(Entry {
            permits,
            deadline_ms,
        });
        if let Some(old) = self.holders.set(holder, entry) {
            self.used -= old.permits;
        }
        self.used += permits;
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
        let total = self.holder(holder).map_or(0, |e| e.permits) + permits;
        let mut e = Effect::set(holder, limit, total, now_ms.saturating_add(ttl_ms));
        e.recreated = Some(false);
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
        Ok((left, Effect::set(holder, self.limit, left, e.deadline_ms)))
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
        Ok(Effect::set(holder, self.limit, e.permits, deadline))
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
        let before = self.holder(holder).map_or(0, |e| e.permits);
        let used = self.used - before + permits;
        let limit = if recreated { used } else { self.limit };
        let mut e = Effect::set(holder, limit, permits, now_ms.saturating_add(ttl_ms));
        e.recreated = Some(recreated);
        e
    }

    pub fn view(&self, now_ms: i64) -> View {
        let holders: Vec<_> = self
            .holders
            .live(now_ms)
            .map(|(h, e)| (h.to_vec(), e.permits, e.deadline_ms - now_ms))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decides and applies, as the glue does.
    fn acq(s: &mut Semaphore, h: &[u8], limit: u64, n: u64, ttl: i64, now: i64) -> Option<u64> {
        let (total, e) = s.acquire(h, limit, n, ttl, now)?;
        s.apply(&e);
        Some(total)
    }

    fn rel(s: &mut Semaphore, h: &[u8], n: Option<u64>) -> Result<u64, Error> {
        let (left, e) = s.release(b"k", h, n)?;
        s.apply(&e);
        Ok(left)
    }

    fn exp(s: &mut Semaphore, now: i64) -> Vec<Vec<u8>> {
        let gone = s.expire(now);
        for e in &gone {
            s.apply(e);
        }
        gone.into_iter().map(|e| e.holder.into_owned()).collect()
    }

    fn rec(s: &mut Semaphore, h: &[u8], n: u64, ttl: i64, now: i64) {
        let e = s.recreate(h, n, ttl, now);
        s.apply(&e);
    }

    #[test]
    fn acquire_within_limit_and_reentrant() {
        let mut s = Semaphore::new(3);
        assert_eq!(acq(&mut s, b"a", 3, 2, 100, 0), Some(2));
        assert_eq!(acq(&mut s, b"b", 3, 2, 100, 0), None, "only 1 left");
        assert_eq!(acq(&mut s, b"a", 3, 1, 100, 0), Some(3), "reentry adds up");
        assert_eq!((s.used(), s.limit()), (3, 3));
    }

    #[test]
    fn failed_request_keeps_limit() {
        let mut s = Semaphore::new(2);
        acq(&mut s, b"a", 2, 2, 100, 0);
        assert_eq!(acq(&mut s, b"b", 5, 4, 100, 0), None);
        assert_eq!(s.limit(), 2, "a failed request changes nothing");
        assert_eq!(acq(&mut s, b"b", 5, 3, 100, 0), Some(3));
        assert_eq!(s.limit(), 5);
    }

    #[test]
    fn lower_limit_takes_nothing_away() {
        let mut s = Semaphore::new(5);
        acq(&mut s, b"a", 5, 4, 100, 0);
        assert_eq!(acq(&mut s, b"b", 2, 1, 100, 0), None);
        assert_eq!(s.holder(b"a").unwrap().permits, 4);
        assert_eq!((s.limit(), s.used()), (5, 4), "the stored limit is still 5");
    }

    #[test]
    fn holders_expire_one_by_one() {
        let mut s = Semaphore::new(2);
        acq(&mut s, b"short", 2, 1, 100, 0);
        acq(&mut s, b"long", 2, 1, 500, 0);
        assert_eq!(s.latest_deadline(), Some(500));
        assert_eq!(s.earliest_deadline(), Some(100));
        assert_eq!(s.view(150).holders.len(), 1);
        assert_eq!(s.len(), 2, "view changes nothing");
        assert_eq!(exp(&mut s, 99), Vec::<Vec<u8>>::new());
        assert_eq!(exp(&mut s, 100), vec![b"short".to_vec()]);
        assert_eq!((s.used(), s.latest_deadline()), (1, Some(500)));
        assert_eq!(exp(&mut s, 1000), vec![b"long".to_vec()]);
        assert!(s.is_empty());
    }

    #[test]
    fn release_partial_and_all() {
        let mut s = Semaphore::new(5);
        acq(&mut s, b"a", 5, 4, 100, 0);
        assert_eq!(rel(&mut s, b"a", Some(1)), Ok(3));
        assert!(rel(&mut s, b"a", Some(4)).is_err());
        assert_eq!(s.used(), 3, "a refused release changes nothing");
        assert!(rel(&mut s, b"b", None).is_err());
        assert_eq!(rel(&mut s, b"a", None), Ok(0));
        assert!(s.is_empty());
    }

    #[test]
    fn recreated_limit_follows_recreated_permits() {
        let mut s = Semaphore::new(0);
        rec(&mut s, b"a", 2, 100, 0);
        rec(&mut s, b"b", 3, 100, 0);
        assert_eq!((s.limit(), s.used()), (5, 5));
        assert_eq!(acq(&mut s, b"c", 8, 1, 100, 0), Some(1));
        rec(&mut s, b"d", 1, 100, 0);
        assert_eq!(s.limit(), 8, "a SEM.ACQUIRE set the limit");
    }

    #[test]
    fn extend_moves_the_deadline() {
        let mut s = Semaphore::new(1);
        acq(&mut s, b"a", 1, 1, 100, 0);
        let e = s.extend(b"k", b"a", 1000, 50).unwrap();
        s.apply(&e);
        assert!(exp(&mut s, 200).is_empty());
        assert_eq!(s.holder(b"a").unwrap().deadline_ms, 1050);
        assert!(s.extend(b"k", b"b", 10, 0).is_err());
    }

    proptest! {
        /// used <= limit after any sequence that starts within the limit and
        /// never lowers it; used always equals the sum of permits; the
        /// deadline index mirrors the holders.
        #[test]
        fn used_never_exceeds_limit(ops in proptest::collection::vec((0u8..4, 0u8..5, 1u64..4, 1i64..50), 1..300)) {
            let limit = 6;
            let mut s = Semaphore::new(limit);
            let mut now = 0;
            for (op, who, n, dt) in ops {
                let h = [who];
                match op {
                    0 => { acq(&mut s, &h, limit, n, dt * 3, now); }
                    1 => { let _ = rel(&mut s, &h, if n == 3 { None } else { Some(n) }); }
                    2 => { if let Ok(e) = s.extend(b"k", &h, dt, now) { s.apply(&e); } }
                    _ => { now += dt; let gone = exp(&mut s, now); for g in gone { prop_assert!(s.holder(&g).is_none()); } }
                }
                prop_assert!(s.used() <= limit);
                prop_assert_eq!(s.used(), s.holders().map(|(_, e)| e.permits).sum::<u64>());
                prop_assert!(s.holders.consistent());
                prop_assert!(s.holders().all(|(_, e)| e.permits > 0));
            }
        }
    }
}
