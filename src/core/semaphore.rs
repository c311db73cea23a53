//! Counting semaphores with a lease per holder, all inside one key.
//!
//! Every holder has its own deadline on the server's clock; `expire` takes
//! the permits of holders whose deadline passed back into the pool. The key's
//! own expiry is kept at the latest holder deadline (the glue does that with
//! `latest_deadline`), so an abandoned semaphore disappears by itself.
//!
//! Operations change nothing when they fail. Each successful change names
//! the holder it touched so the glue can replicate exactly that holder's new
//! state (`set_holder` is what replicas and the AOF apply).

use std::collections::{BTreeMap, BTreeSet};

use super::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub permits: u64,
    pub deadline_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Semaphore {
    limit: u64,
    used: u64,
    holders: BTreeMap<Box<[u8]>, Entry>,
    /// (deadline, holder) for every holder: earliest first, for expiry.
    by_deadline: BTreeSet<(i64, Box<[u8]>)>,
    /// Re-created by `SEM.EXTEND` during the restart grace: the limit is
    /// the permits re-created so far, until a `SEM.ACQUIRE` sets it.
    recreated: bool,
    /// Counts changes, so the glue can tell whether a call wrote anything.
    changes: u64,
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
        self.holders.get(holder).copied()
    }

    pub fn holders(&self) -> impl Iterator<Item = (&[u8], Entry)> {
        self.holders.iter().map(|(h, e)| (&**h, *e))
    }

    /// The key's expiry: the latest holder deadline.
    pub fn latest_deadline(&self) -> Option<i64> {
        self.by_deadline.iter().next_back().map(|(d, _)| *d)
    }

    /// The earliest holder deadline: when permits next return by themselves.
    pub fn earliest_deadline(&self) -> Option<i64> {
        self.by_deadline.iter().next().map(|(d, _)| *d)
    }

    /// Sets the stored limit (replication, AOF, and a successful acquire).
    pub fn set_limit(&mut self, limit: u64) {
        if self.limit != limit {
            self.limit = limit;
            self.changes += 1;
        }
    }

    /// A counter that moves with every change.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Sets one holder's state outright; `permits` 0 removes the holder.
    pub fn set_holder(&mut self, holder: &[u8], permits: u64, deadline_ms: i64) {
        self.changes += 1;
        if let Some(old) = self.holders.remove(holder) {
            self.used -= old.permits;
            self.by_deadline.remove(&(old.deadline_ms, holder.into()));
        }
        if permits > 0 {
            self.used += permits;
            self.holders.insert(
                holder.into(),
                Entry {
                    permits,
                    deadline_ms,
                },
            );
            self.by_deadline.insert((deadline_ms, holder.into()));
        }
    }

    /// Removes every holder whose lease ended at or before `now_ms`; returns
    /// them, earliest first, so the glue can replicate each removal.
    pub fn expire(&mut self, now_ms: i64) -> Vec<Vec<u8>> {
        let mut gone = Vec::new();
        while let Some((deadline, _)) = self.by_deadline.first() {
            if *deadline > now_ms {
                break;
            }
            if let Some((_, holder)) = self.by_deadline.pop_first() {
                self.changes += 1;
                if let Some(e) = self.holders.remove(&holder) {
                    self.used -= e.permits;
                }
                gone.push(holder.into_vec());
            }
        }
        gone
    }

    /// Would `permits` more fit under `limit` right now?
    pub fn fits(&self, limit: u64, permits: u64) -> bool {
        self.used + permits <= limit
    }

    /// `SEM.ACQUIRE` without waiting, on a semaphore already expired to
    /// `now_ms`. `Some(total held)` on success, `None` when not enough
    /// permits are free (nothing changes then).
    pub fn acquire(
        &mut self,
        holder: &[u8],
        limit: u64,
        permits: u64,
        ttl_ms: i64,
        now_ms: i64,
    ) -> Option<u64> {
        if !self.fits(limit, permits) {
            return None;
        }
        let total = self.holder(holder).map_or(0, |e| e.permits) + permits;
        self.set_limit(limit);
        self.recreated = false;
        self.set_holder(holder, total, now_ms.saturating_add(ttl_ms));
        Some(total)
    }

    /// `SEM.RELEASE`: gives back `permits` (None: all). Returns what the
    /// holder still holds.
    pub fn release(
        &mut self,
        key: &[u8],
        holder: &[u8],
        permits: Option<u64>,
    ) -> Result<u64, Error> {
        let e = self.holder(holder).ok_or_else(|| not_held(key, holder))?;
        let give = permits.unwrap_or(e.permits);
        if give > e.permits {
            return Err(not_held(key, holder));
        }
        let left = e.permits - give;
        self.set_holder(holder, left, e.deadline_ms);
        Ok(left)
    }

    /// `SEM.EXTEND`: a new lease for the holder's permits.
    pub fn extend(
        &mut self,
        key: &[u8],
        holder: &[u8],
        ttl_ms: i64,
        now_ms: i64,
    ) -> Result<(), Error> {
        let e = self.holder(holder).ok_or_else(|| not_held(key, holder))?;
        self.set_holder(holder, e.permits, now_ms.saturating_add(ttl_ms));
        Ok(())
    }

    /// `SEM.EXTEND` of a missing holder during the restart grace: it gets
    /// back the `permits` it believes it holds. A semaphore that did not
    /// exist (`is_empty`) becomes a re-created one.
    pub fn recreate(&mut self, holder: &[u8], permits: u64, ttl_ms: i64, now_ms: i64) {
        if self.is_empty() {
            self.recreated = true;
        }
        self.set_holder(holder, permits, now_ms.saturating_add(ttl_ms));
        if self.recreated {
            self.set_limit(self.used);
        }
    }

    /// The state as seen at `now_ms`, without changing anything (read-only
    /// commands and replicas hide expired holders instead of removing them).
    pub fn view(&self, now_ms: i64) -> View {
        let holders: Vec<_> = self
            .holders
            .iter()
            .filter(|(_, e)| e.deadline_ms > now_ms)
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

fn not_held(key: &[u8], holder: &[u8]) -> Error {
    Error::NotHeld {
        key: key.to_vec(),
        holder: holder.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn acquire_within_limit_and_reentrant() {
        let mut s = Semaphore::new(3);
        assert_eq!(s.acquire(b"a", 3, 2, 100, 0), Some(2));
        assert_eq!(s.acquire(b"b", 3, 2, 100, 0), None, "only 1 left");
        assert_eq!(s.acquire(b"a", 3, 1, 100, 0), Some(3), "reentry adds up");
        assert_eq!((s.used(), s.limit()), (3, 3));
    }

    #[test]
    fn failed_request_keeps_limit() {
        let mut s = Semaphore::new(2);
        s.acquire(b"a", 2, 2, 100, 0);
        assert_eq!(s.acquire(b"b", 5, 4, 100, 0), None);
        assert_eq!(s.limit(), 2, "a failed request changes nothing");
        assert_eq!(s.acquire(b"b", 5, 3, 100, 0), Some(3));
        assert_eq!(s.limit(), 5);
    }

    #[test]
    fn lower_limit_takes_nothing_away() {
        let mut s = Semaphore::new(5);
        s.acquire(b"a", 5, 4, 100, 0);
        assert_eq!(s.acquire(b"b", 2, 1, 100, 0), None);
        assert_eq!(s.holder(b"a").unwrap().permits, 4);
        assert_eq!((s.limit(), s.used()), (5, 4), "the stored limit is still 5");
    }

    #[test]
    fn holders_expire_one_by_one() {
        let mut s = Semaphore::new(2);
        s.acquire(b"short", 2, 1, 100, 0);
        s.acquire(b"long", 2, 1, 500, 0);
        assert_eq!(s.latest_deadline(), Some(500));
        assert_eq!(s.earliest_deadline(), Some(100));
        assert_eq!(s.view(150).holders.len(), 1);
        assert_eq!(s.len(), 2, "view changes nothing");
        assert_eq!(s.expire(99), Vec::<Vec<u8>>::new());
        assert_eq!(s.expire(100), vec![b"short".to_vec()]);
        assert_eq!((s.used(), s.latest_deadline()), (1, Some(500)));
        assert_eq!(s.expire(1000), vec![b"long".to_vec()]);
        assert!(s.is_empty());
    }

    #[test]
    fn release_partial_and_all() {
        let mut s = Semaphore::new(5);
        s.acquire(b"a", 5, 4, 100, 0);
        assert_eq!(s.release(b"k", b"a", Some(1)), Ok(3));
        assert!(s.release(b"k", b"a", Some(4)).is_err());
        assert_eq!(s.used(), 3, "a refused release changes nothing");
        assert!(s.release(b"k", b"b", None).is_err());
        assert_eq!(s.release(b"k", b"a", None), Ok(0));
        assert!(s.is_empty());
    }

    #[test]
    fn recreated_limit_follows_recreated_permits() {
        let mut s = Semaphore::new(0);
        s.recreate(b"a", 2, 100, 0);
        s.recreate(b"b", 3, 100, 0);
        assert_eq!((s.limit(), s.used()), (5, 5));
        assert_eq!(s.acquire(b"c", 8, 1, 100, 0), Some(1));
        s.recreate(b"d", 1, 100, 0);
        assert_eq!(s.limit(), 8, "a SEM.ACQUIRE set the limit");
    }

    #[test]
    fn extend_moves_the_deadline() {
        let mut s = Semaphore::new(1);
        s.acquire(b"a", 1, 1, 100, 0);
        s.extend(b"k", b"a", 1000, 50).unwrap();
        assert!(s.expire(200).is_empty());
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
                    0 => { s.acquire(&h, limit, n, dt * 3, now); }
                    1 => { let _ = s.release(b"k", &h, if n == 3 { None } else { Some(n) }); }
                    2 => { let _ = s.extend(b"k", &h, dt, now); }
                    _ => { now += dt; let gone = s.expire(now); for g in gone { prop_assert!(s.holder(&g).is_none()); } }
                }
                prop_assert!(s.used() <= limit);
                prop_assert_eq!(s.used(), s.holders().map(|(_, e)| e.permits).sum::<u64>());
                prop_assert_eq!(s.by_deadline.len(), s.holders.len());
                prop_assert!(s.holders().all(|(_, e)| e.permits > 0));
            }
        }
    }
}
