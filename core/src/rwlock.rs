//! Read-write locks: many readers or one writer, each holder with its own
//! lease and fence, all inside one key. The rules are those of Java's
//! `ReentrantReadWriteLock` in fair mode, plus upgrade:
//!
//! - a holder may always add a read hold (refusing it could deadlock a
//!   reader on itself);
//! - a newcomer reads when nobody else writes and nobody is queued ahead;
//! - a newcomer writes when nobody else holds anything and nobody is queued
//!   ahead; the writer may reenter;
//! - a holder that only reads may upgrade when it is the only holder left.
//!   Upgrades do not queue behind newcomers: whoever is queued would have
//!   to wait for the upgrader's read holds anyway.
//!
//! As with semaphores, decisions return an `Effect` (one holder's new
//! state), which is also what replicas and the AOF apply.

use std::borrow::Cow;

use super::error::Error;
use super::fence::FenceCounter;
use super::leases::{self, Leases};
use super::since::Since;

/// Most holds of one mode per holder.
pub const MAX_HOLDS: u64 = super::bounds::MAX_COUNT;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub reads: u64,
    pub writes: u64,
    pub fence: u64,
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
pub struct RwLock {
    holders: Leases<Entry>,
    /// The holder with write holds, if any (then it is the only holder).
    writer: Option<Box<[u8]>>,
}

/// One holder's new state; no reads and no writes: the holder leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect<'h> {
    pub holder: Cow<'h, [u8]>,
    pub reads: u64,
    pub writes: u64,
    pub fence: u64,
    pub deadline_ms: i64,
    /// As `Entry::since`: the rules carry a holder's over (`..e`);
    /// unknown from the replication stream.
    pub since: Since,
}

impl<'h> Effect<'h> {
    pub fn set(holder: &'h [u8], e: Entry) -> Effect<'h> {
        Effect {
            holder: Cow::Borrowed(holder),
            reads: e.reads,
            writes: e.writes,
            fence: e.fence,
            deadline_ms: e.deadline_ms,
            since: e.since,
        }
    }

    fn entry(&self) -> Entry {
        Entry {
            reads: self.reads,
            writes: self.writes,
            fence: self.fence,
            deadline_ms: self.deadline_ms,
            since: self.since,
        }
    }
}

/// A grant: the holder's fence, and whether it is new to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub fence: u64,
    pub fresh: bool,
}

fn bump(n: u64) -> Result<u64, Error> {
    super::bounds::one_more(n, "hold count")
}

impl RwLock {
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

    pub fn writer(&self) -> Option<&[u8]> {
        self.writer.as_deref()
    }

    pub fn latest_deadline(&self) -> Option<i64> {
        self.holders.latest_deadline()
    }

    pub fn earliest_deadline(&self) -> Option<i64> {
        self.holders.earliest_deadline()
    }

    /// Applies an effect decided here or received from the master.
    /// Returns the holder's entry when the effect ended its hold.
    pub fn apply(&mut self, e: &Effect) -> Option<Entry> {
        let h: &[u8] = &e.holder;
        let holds = e.reads > 0 || e.writes > 0;
        let old = self.holders.set(h, holds.then(|| e.entry()));
        if self.writer.as_deref() == Some(h) {
            self.writer = None;
        }
        if e.writes > 0 {
            self.writer = Some(h.into());
        }
        old.filter(|_| !holds)
    }

    /// Holders whose lease ended by `now_ms`, as effects that remove them.
    pub fn expire(&self, now_ms: i64) -> Vec<Effect<'static>> {
        self.holders
            .ended(now_ms)
            .into_iter()
            .map(|h| Effect {
                holder: Cow::Owned(h.to_vec()),
                reads: 0,
                writes: 0,
                fence: 0,
                deadline_ms: 0,
                since: Since::UNKNOWN,
            })
            .collect()
    }

    /// True when `holder` asking for `mode` is an upgrade (it only reads).
    pub fn is_upgrade(&self, holder: &[u8], mode: Mode) -> bool {
        mode == Mode::Write && self.holder(holder).is_some_and(|e| e.writes == 0)
    }

    /// `RWLOCK.ACQUIRE` without waiting: `Ok(None)` when refused.
    /// `queued`: other requests wait for the key (a newcomer goes behind
    /// them; holders adding reads, the writer and upgrades do not).
    pub fn acquire<'h>(
        &self,
        holder: &'h [u8],
        mode: Mode,
        queued: bool,
        ttl_ms: i64,
        now_ms: i64,
        fences: &mut FenceCounter,
    ) -> Result<Option<(Grant, Effect<'h>)>, Error> {
        let deadline_ms = now_ms.saturating_add(ttl_ms);
        let mine = self.holder(holder);
        let next = match (mine, mode) {
            (Some(e), Mode::Read) => Entry {
                reads: bump(e.reads)?,
                ..e
            },
            (Some(e), Mode::Write) if e.writes > 0 => Entry {
                writes: bump(e.writes)?,
                ..e
            },
            (Some(e), Mode::Write) if self.holders.len() == 1 => Entry { writes: 1, ..e },
            (Some(_), Mode::Write) => return Ok(None),
            (None, _) if queued => return Ok(None),
            (None, Mode::Read) if self.writer.is_some() => return Ok(None),
            (None, Mode::Write) if !self.holders.is_empty() => return Ok(None),
            (None, _) => Entry {
                reads: u64::from(mode == Mode::Read),
                writes: u64::from(mode == Mode::Write),
                fence: fences.next(now_ms)?,
                deadline_ms,
                since: Since::at(now_ms),
            },
        };
        let grant = Grant {
            fence: next.fence,
            fresh: mine.is_none(),
        };
        let next = Entry {
            deadline_ms,
            ..next
        };
        Ok(Some((grant, Effect::set(holder, next))))
    }

    /// One hold of `mode` fewer. Reply: (reads, writes) left.
    pub fn release<'h>(
        &self,
        key: &[u8],
        holder: &'h [u8],
        mode: Mode,
    ) -> Result<((u64, u64), Effect<'h>), Error> {
        let e = self
            .holder(holder)
            .ok_or_else(|| Error::not_held(key, holder))?;
        let next = match mode {
            Mode::Read if e.reads > 0 => Entry {
                reads: e.reads - 1,
                ..e
            },
            Mode::Write if e.writes > 0 => Entry {
                writes: e.writes - 1,
                ..e
            },
            _ => return Err(Error::not_held(key, holder)),
        };
        Ok(((next.reads, next.writes), Effect::set(holder, next)))
    }

    /// Resets the holder's lease (all its holds).
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
        let deadline_ms = now_ms.saturating_add(ttl_ms);
        Ok(Effect::set(holder, Entry { deadline_ms, ..e }))
    }

    /// Holders whose lease still runs at `now_ms`.
    pub fn live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], Entry)> {
        self.holders.live(now_ms)
    }
}

pub mod args;
pub mod stored;

#[cfg(test)]
mod tests;
