//! Request-ids (`ID request-id`, docs/commands.md's "Retries"): what the server
//! remembers of the changing requests it applied, so that a resend gets
//! the first reply and changes nothing.
//!
//! Memory is grouped by where a request applied: database, (first) key and
//! holder. A group lives while its holder holds the key (the glue checks
//! that when a group comes due) and `id-memory-ms` after its latest
//! request; it keeps at most `max-ids-per-holder` ids, newest last. Groups
//! of freed keys count against `max-remembered-ids`, the oldest forgotten
//! first. Nothing here reads a clock or a key: times come in, and "is it
//! still held" is the glue's answer.

mod id;
mod names;
mod order;
mod reading;
mod request;
mod slots;

use super::error::Error;
use super::hash::Map;
pub use id::Id;
pub use names::Names;
use names::{HolderPart, KeyPart};
use order::Order;
pub use request::{print, spots, valid_id, Print, Spots};
use slots::{Holders, Recent};

/// Longest request-id in bytes.
pub const MAX_ID_LEN: usize = 64;

/// Nodes `due` places again per call.
const REPLACE: usize = 64;

/// Where requests applied: one group of remembered ids. Shared names:
/// the group's maps, its place in the due order and a queued request's tag
/// all hold the same ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    pub db: i32,
    pub names: Names,
}

impl Address {
    pub fn new(db: i32, key: &[u8], holder: &[u8]) -> Address {
        Address {
            db,
            names: Names::new(key, holder),
        }
    }

    pub fn key(&self) -> &[u8] {
        self.names.key()
    }

    pub fn holder(&self) -> &[u8] {
        self.names.holder()
    }
}

/// A reply worth remembering: every changing command answers an integer
/// or an array of integers when it applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Int(i64),
    Ints(Box<[i64]>),
}

/// One applied request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub id: Id,
    /// The request's arguments, hashed (`print`): the same id with others
    /// is an error, not a replay.
    pub print: u64,
    pub answer: Answer,
    /// When it applied (unix ms, the master's clock).
    pub at_ms: i64,
}

#[derive(Debug, Default)]
struct Group {
    ids: Recent<Remembered>,
    /// When the group comes due: its latest request + `id-memory-ms`, or
    /// later once found still held.
    due: i64,
    /// Its place in the due order.
    slot: usize,
    /// Its place among the groups of freed keys, if its latest request
    /// left the holder holding nothing.
    freed: Option<usize>,
}

/// How long and how much to remember.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub memory_ms: i64,
    pub per_holder: usize,
}

/// A database's groups, by key and holder.
type Keys = Map<KeyPart, Holders<Group>>;

/// Every group, and the order in which they come due.
#[derive(Debug, Default)]
pub struct Memory {
    groups: Map<i32, Keys>,
    count: usize,
    order: Order<Address>,
    total: usize,
    /// The groups whose latest request freed the key, oldest first, and
    /// their ids: what `max-remembered-ids` bounds. A held key's group is
    /// not among them, so keeping within the bound never has to look past
    /// held groups (it once looked at up to four per request, for ever,
    /// once more held ids than the bound were remembered).
    freed: Order<Address>,
    freed_ids: usize,
}

/// The two orders a group has a node in.
#[derive(Clone, Copy)]
enum Which {
    Due,
    Freed,
}

/// Takes a node out of an order: its item, and the group whose node moved
/// into its slot, with that slot.
fn unlink(order: &mut Order<Address>, slot: usize) -> (Option<Address>, Option<(Address, usize)>) {
    let mut moved = None;
    let item = order.remove(slot, |at, s| moved = Some((at.clone(), s)));
    (item, moved)
}

/// Whether a reply says its holder still holds: every changing command
/// answers 0 (or only zeros) exactly when it left the holder nothing.
fn leaves_held(a: &Answer) -> bool {
    match a {
        Answer::Int(v) => *v != 0,
        Answer::Ints(vs) => vs.iter().any(|v| *v != 0),
    }
}

/// What a request with an id finds.
#[derive(Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// Not applied before: run it.
    New,
    /// Applied: answer this, change nothing.
    Replay(&'a Answer),
    /// The id applied with other arguments.
    Other,
}

impl Memory {
    fn group(&self, at: &Address) -> Option<&Group> {
        self.groups.get(&at.db)?.get(at.key())?.get(at.holder())
    }

    fn group_mut(&mut self, at: &Address) -> Option<&mut Group> {
        self.groups
            .get_mut(&at.db)?
            .get_mut(at.key())?
            .get_mut(at.holder())
    }

    fn take_group(&mut self, at: &Address) -> Option<Group> {
        let keys = self.groups.get_mut(&at.db)?;
        let (g, none_left) = keys.get_mut(at.key())?.remove(at.holder());
        let g = g?;
        if none_left {
            keys.remove(at.key());
            if keys.is_empty() {
                self.groups.remove(&at.db);
            }
        }
        self.count -= 1;
        Some(g)
    }

    pub fn find(&self, at: &Address, id: &[u8], print: u64) -> Found<'_> {
        self.lookup(at.db, (at.key(), at.holder()), id, print).0
    }

    /// `find` by borrowed names, with the group's own shared names when it
    /// has a group: a request of a known group then copies neither.
    pub fn lookup(
        &self,
        db: i32,
        (key, holder): (&[u8], &[u8]),
        id: &[u8],
        print: u64,
    ) -> (Found<'_>, Option<Names>) {
        let named = self
            .groups
            .get(&db)
            .and_then(|keys| keys.get(key)?.get_named(holder));
        let Some((h, g)) = named else {
            return (Found::New, None);
        };
        let found = match g.ids.iter().rev().find(|r| *r.id == *id) {
            None => Found::New,
            Some(r) if r.print == print => Found::Replay(&r.answer),
            Some(_) => Found::Other,
        };
        (found, Some(h.0.clone()))
    }

    /// Remembers an applied request (a newer one with the same id replaces
    /// it). The group comes due `memory_ms` after `r.at_ms` (or later, if
    /// it was due later already).
    pub fn remember(&mut self, at: Address, r: Remembered, b: Bounds) {
        use std::collections::hash_map::Entry;
        let due = r.at_ms.saturating_add(b.memory_ms);
        let keys = self.groups.entry(at.db).or_default();
        let (g, new) = match keys.entry(KeyPart(at.names.clone())) {
            Entry::Occupied(o) => o.into_mut().entry(&at.names),
            Entry::Vacant(v) => match v.insert(Holders::new(HolderPart(at.names.clone()))) {
                Holders::One(_, g) => (g, true),
                Holders::Many(_) => unreachable!("a new key has one holder"),
            },
        };
        let mut moved = None;
        if let Some(slot) = g.freed.take() {
            moved = unlink(&mut self.freed, slot).1;
            self.freed_ids -= g.ids.len();
        }
        if new {
            self.count += 1;
        } else if g.ids.remove_where(|o| o.id == r.id).is_some() {
            self.total -= 1;
        }
        let freed_at = (!leaves_held(&r.answer)).then_some(r.at_ms);
        g.ids.push_back(r);
        self.total += 1;
        while g.ids.len() > b.per_holder.max(1) {
            g.ids.pop_front();
            self.total -= 1;
        }
        if let Some(at_ms) = freed_at {
            g.freed = Some(self.freed.insert(at_ms, at.clone()).0);
            self.freed_ids += g.ids.len();
        }
        // A known group keeps its node where it is and only its due time
        // moves: `due` places the node again when it comes first (once per
        // `id-memory-ms` at most, and on the timer, not on a request).
        if new {
            (g.slot, g.due) = self.order.insert(due, at);
        } else {
            g.due = g.due.max(due);
        }
        self.relink(moved, Which::Freed);
    }

    /// Tells the group whose node moved in an order its new slot.
    fn relink(&mut self, moved: Option<(Address, usize)>, which: Which) {
        let Some((at, slot)) = moved else {
            return;
        };
        if let Some(g) = self.group_mut(&at) {
            match which {
                Which::Due => g.slot = slot,
                Which::Freed => g.freed = Some(slot),
            }
        }
    }

    /// Ids remembered for freed keys (bounded by `max-remembered-ids`).
    pub fn freed_len(&self) -> usize {
        self.freed_ids
    }

    /// The group of a freed key whose latest request is the oldest.
    pub fn oldest_freed(&self) -> Option<&Address> {
        self.freed.first().map(|(_, a)| a)
    }

    /// The group that comes due first, if it is due by `now_ms`. A node
    /// found first before its group's latest due time (a later request
    /// moved only the time) is placed again on the way: at most
    /// `REPLACE` of them per call, then None until the next call, so a
    /// timer firing does bounded work however many groups were busy.
    pub fn due(&mut self, now_ms: i64) -> Option<Address> {
        for _ in 0..REPLACE {
            let (node_due, at) = self.order.first().filter(|(d, _)| *d <= now_ms)?;
            let (slot, due) = self.group(at).map_or((0, node_due), |g| (g.slot, g.due));
            if due <= node_due {
                return Some(at.clone());
            }
            let at = at.clone();
            self.place(&at, slot, due);
        }
        None
    }

    /// When the first group comes due.
    pub fn next_due(&self) -> Option<i64> {
        self.order.first().map(|(due, _)| due)
    }

    /// A group found still held: due again at `until_ms`, behind the rest,
    /// and no longer among the freed.
    pub fn keep_until(&mut self, at: &Address, until_ms: i64) {
        let Some(g) = self.group_mut(at) else {
            return;
        };
        let (freed, len) = (g.freed.take(), g.ids.len());
        let (slot, due) = (g.slot, until_ms.max(g.due));
        if let Some(f) = freed {
            let moved = unlink(&mut self.freed, f).1;
            self.freed_ids -= len;
            self.relink(moved, Which::Freed);
        }
        self.place(at, slot, due);
    }

    /// Moves group `at`'s node, at `slot` in the due order, to `due`.
    fn place(&mut self, at: &Address, slot: usize, due: i64) {
        let (owned, moved) = unlink(&mut self.order, slot);
        self.relink(moved, Which::Due);
        let Some(owned) = owned else {
            return;
        };
        let placed = self.order.insert(due, owned);
        if let Some(g) = self.group_mut(at) {
            (g.slot, g.due) = placed;
        }
    }

    /// Forgets one group.
    pub fn forget(&mut self, at: &Address) {
        if let Some(g) = self.take_group(at) {
            let moved = unlink(&mut self.order, g.slot).1;
            self.relink(moved, Which::Due);
            self.total -= g.ids.len();
            if let Some(f) = g.freed {
                let moved = unlink(&mut self.freed, f).1;
                self.relink(moved, Which::Freed);
                self.freed_ids -= g.ids.len();
            }
        }
    }

    /// Forgets one id (a grant taken back: its reply never reached anyone).
    pub fn forget_id(&mut self, at: &Address, id: &[u8]) {
        let Some(g) = self.group_mut(at) else {
            return;
        };
        let gone = usize::from(g.ids.remove_where(|r| *r.id == *id).is_some());
        let (empty, freed) = (g.ids.is_empty(), g.freed.is_some());
        self.total -= gone;
        if freed {
            self.freed_ids -= gone;
        }
        if empty {
            self.forget(at);
        }
    }

    /// The key went by another hand than a request of its own (its lease
    /// ran out, a `DEL`, an eviction): its groups count among the freed,
    /// each from its latest request, so `max-remembered-ids` bounds them
    /// as it bounds those a release freed.
    pub fn key_gone(&mut self, db: i32, key: &[u8]) {
        let Some(holders) = self.groups.get(&db).and_then(|k| k.get(key)) else {
            return;
        };
        let open: Vec<(Names, i64)> = holders
            .iter()
            .filter(|(_, g)| g.freed.is_none())
            .map(|(h, g)| (h.0.clone(), g.ids.iter().next_back().map_or(0, |r| r.at_ms)))
            .collect();
        for (names, at_ms) in open {
            let at = Address { db, names };
            let slot = self.freed.insert(at_ms, at.clone()).0;
            if let Some(g) = self.group_mut(&at) {
                g.freed = Some(slot);
                self.freed_ids += g.ids.len();
            }
        }
    }

    /// Forgets every group of database `db` (`FLUSHDB`), or of all.
    pub fn forget_db(&mut self, db: Option<i32>) {
        let gone: Vec<Address> = self
            .order
            .iter()
            .filter(|a| db.is_none_or(|d| a.db == d))
            .cloned()
            .collect();
        for a in gone {
            self.forget(&a);
        }
    }

    /// Ids remembered in all.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn groups(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

#[cfg(test)]
mod tests;
