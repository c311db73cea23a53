//! `keep-max-idle-ms` at the cost of what is due: each bound connection is
//! looked at when it could first have been silent that long, not on every
//! pass. A look that finds it spoke lately puts it off by what is left;
//! so a connection that talks is looked at about once per
//! `keep-max-idle-ms`, whatever the number of others. (Looking at every
//! bound connection four times a second cost 6.8% of a core at 8,000.)

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::hash::Map;

#[derive(Debug, Default)]
pub struct IdleSchedule {
    /// (when, client), soonest first; one entry per watched client.
    due: BinaryHeap<Reverse<(i64, u64)>>,
    watched: Map<u64, i64>,
    /// The setting the schedule was made for (0: none is kept).
    built_for: i64,
}

impl IdleSchedule {
    /// `client` got a binding: looked at once it may have been silent for
    /// `max_idle` (it has just spoken).
    pub fn watch(&mut self, client: u64, now: i64, max_idle: i64) {
        if max_idle > 0 && self.built_for == max_idle && !self.watched.contains_key(&client) {
            self.put(client, now.saturating_add(max_idle));
        }
    }

    /// The setting changed (or was turned on): every bound connection is
    /// looked at now (once per change, O(bound connections)).
    pub fn follow(&mut self, max_idle: i64, bound: impl Iterator<Item = u64>, now: i64) {
        if self.built_for == max_idle {
            return;
        }
        *self = IdleSchedule {
            built_for: max_idle,
            ..IdleSchedule::default()
        };
        if max_idle > 0 {
            for c in bound {
                self.put(c, now);
            }
        }
    }

    fn put(&mut self, client: u64, at: i64) {
        self.watched.insert(client, at);
        self.due.push(Reverse((at, client)));
    }

    /// The connections due for a look at `now`; each is no longer watched
    /// until `again` (or a later `watch`).
    pub fn take_due(&mut self, now: i64) -> Vec<u64> {
        let mut out = vec![];
        while let Some(Reverse((at, c))) = self.due.peek().copied() {
            if at > now {
                break;
            }
            self.due.pop();
            if self.watched.get(&c) == Some(&at) {
                self.watched.remove(&c);
                out.push(c);
            }
        }
        out
    }

    /// A look found `client` silent for `idle` ms only: looked at again
    /// when it may have been silent for the whole setting.
    pub fn again(&mut self, client: u64, idle: i64, now: i64) {
        let left = self.built_for.saturating_sub(idle).max(1);
        self.put(client, now.saturating_add(left));
    }

    pub fn len(&self) -> usize {
        self.watched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_talking_connection_is_looked_at_once_per_setting() {
        let mut s = IdleSchedule::default();
        s.follow(1000, [1, 2].into_iter(), 0);
        assert_eq!(s.take_due(0), vec![1, 2], "turned on: all looked at now");
        s.again(1, 0, 0);
        s.again(2, 900, 0);
        assert_eq!(s.take_due(99), Vec::<u64>::new());
        assert_eq!(s.take_due(100), vec![2], "silent 900 of 1000: due in 100");
        assert_eq!(s.take_due(999), Vec::<u64>::new());
        assert_eq!(s.take_due(1000), vec![1]);
        s.watch(3, 1000, 1000);
        s.watch(3, 1500, 1000);
        assert_eq!(s.len(), 1, "watched once");
        assert_eq!(s.take_due(2000), vec![3]);
        s.follow(0, [5].into_iter(), 2000);
        s.watch(5, 2000, 0);
        assert!(
            s.is_empty() && s.take_due(i64::MAX).is_empty(),
            "off: nothing kept"
        );
    }

    #[test]
    fn changing_the_setting_rebuilds_once() {
        let mut s = IdleSchedule::default();
        s.follow(500, [1].into_iter(), 0);
        s.follow(500, [1, 2].into_iter(), 10);
        assert_eq!(s.len(), 1, "same setting: nothing rebuilt");
        s.follow(800, [1, 2].into_iter(), 20);
        assert_eq!(s.take_due(20), vec![1, 2]);
    }
}
