//! The order in which groups of request-ids come due: a list sorted by due
//! time, kept in a dense slab so that a group can leave it from anywhere at
//! the cost of a few links, and the slab never holds more than the groups
//! there are (a leaving node's place is taken by the last one, whose owner
//! is told its new slot). A group's due time is almost always the latest
//! yet (its request's time plus the same `id-memory-ms`), so a new one goes
//! in at the tail; a search from the tail is bounded, and past that bound
//! the group is placed there and comes due as late as its neighbour (the
//! docs/commands.md asks for *at least* `id-memory-ms`). A sorted tree cost about 600
//! instructions per remembered request in comparisons alone.

const NIL: usize = usize::MAX;

/// How far a new group looks back from the tail for its place.
const LOOK_BACK: usize = 16;

#[derive(Debug)]
struct Node<T> {
    due: i64,
    item: T,
    prev: usize,
    next: usize,
}

#[derive(Debug)]
pub struct Order<T> {
    nodes: Vec<Node<T>>,
    head: usize,
    tail: usize,
}

impl<T> Default for Order<T> {
    fn default() -> Self {
        Order {
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }
}

impl<T> Order<T> {
    /// Places `item` due at `due`; answers its slot and the due time it
    /// was given (later than asked only past the look-back).
    pub fn insert(&mut self, due: i64, item: T) -> (usize, i64) {
        // The node it goes after: the last one due no later than it.
        let mut after = self.tail;
        let mut looked = 0;
        while after != NIL && self.nodes[after].due > due && looked < LOOK_BACK {
            after = self.nodes[after].prev;
            looked += 1;
        }
        let due = match after {
            NIL => due,
            a => due.max(self.nodes[a].due),
        };
        let next = match after {
            NIL => self.head,
            a => self.nodes[a].next,
        };
        let slot = self.nodes.len();
        self.nodes.push(Node {
            due,
            item,
            prev: after,
            next,
        });
        self.link(after, slot);
        self.link(slot, next);
        (slot, due)
    }

    /// Makes `b` follow `a` (NIL for `a`: `b` is first; for `b`: `a` is
    /// last).
    fn link(&mut self, a: usize, b: usize) {
        match a {
            NIL => self.head = b,
            a => self.nodes[a].next = b,
        }
        match b {
            NIL => self.tail = a,
            b => self.nodes[b].prev = a,
        }
    }

    /// Takes a slot's item out (None: no such slot). The last node moves
    /// into the freed slot: `moved` is told its item and new slot.
    pub fn remove(&mut self, slot: usize, moved: impl FnOnce(&T, usize)) -> Option<T> {
        let (prev, next) = {
            let n = self.nodes.get(slot)?;
            (n.prev, n.next)
        };
        self.link(prev, next);
        let gone = self.nodes.swap_remove(slot);
        if let Some(n) = self.nodes.get(slot) {
            let (p, x) = (n.prev, n.next);
            self.link(p, slot);
            self.link(slot, x);
            moved(&self.nodes[slot].item, slot);
        }
        if self.nodes.is_empty() {
            // Give the slab's memory back once nothing is in it.
            self.nodes = Vec::new();
        }
        Some(gone.item)
    }

    /// The item due first, with its due time.
    pub fn first(&self) -> Option<(i64, &T)> {
        let n = self.nodes.get(self.head)?;
        Some((n.due, &n.item))
    }

    /// Every item, the first due first.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || {
            let n = self.nodes.get(at)?;
            at = n.next;
            Some(&n.item)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(o: &Order<u32>) -> Vec<u32> {
        o.iter().copied().collect()
    }

    fn dues(o: &Order<u32>) -> Vec<i64> {
        let mut at = o.head;
        std::iter::from_fn(|| {
            let n = o.nodes.get(at)?;
            at = n.next;
            Some(n.due)
        })
        .collect()
    }

    #[test]
    fn sorted_by_due_and_first_in_first_out_among_equals() {
        let mut o = Order::default();
        o.insert(10, 1);
        o.insert(30, 3);
        o.insert(20, 2);
        o.insert(20, 4);
        assert_eq!(items(&o), vec![1, 2, 4, 3]);
        assert_eq!(o.first(), Some((10, &1)));
    }

    #[test]
    fn the_last_node_takes_a_removed_ones_slot() {
        let mut o = Order::default();
        let (a, _) = o.insert(1, 1);
        let (b, _) = o.insert(2, 2);
        let (c, _) = o.insert(3, 3);
        let mut told = None;
        assert_eq!(
            o.remove(a, |item, slot| told = Some((*item, slot))),
            Some(1)
        );
        assert_eq!(told, Some((3, a)), "3 moved from {c} into 1's slot");
        assert_eq!(items(&o), vec![2, 3]);
        assert_eq!(o.nodes.len(), 2);
        assert_eq!(o.remove(c, |_, _| panic!("no such slot now")), None);
        assert_eq!(o.remove(b, |_, _| panic!("the last one goes")), Some(2));
        assert_eq!(o.remove(a, |_, _| panic!("alone")), Some(3));
        assert!(o.first().is_none() && o.nodes.capacity() == 0);
    }

    #[test]
    fn past_the_look_back_a_group_comes_due_with_its_neighbour() {
        let mut o = Order::default();
        for i in 0..40 {
            o.insert(1000 + i, i as u32);
        }
        let (_, due) = o.insert(5, 99);
        assert_eq!(due, 1000 + 40 - 1 - LOOK_BACK as i64);
        assert_eq!(items(&o)[40 - LOOK_BACK], 99);
    }

    proptest::proptest! {
        /// Against a plain list: the same items, in due order, each due no
        /// earlier than asked (exactly as asked within the look-back), each
        /// at the slot it was last told, the slab no bigger than the list.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec((0i64..50, proptest::bool::ANY, 0usize..64), 1..300)) {
            let mut o = Order::default();
            // (slot, item)
            let mut model: Vec<(usize, u32)> = Vec::new();
            for (i, (due, add, pick)) in ops.into_iter().enumerate() {
                if add || model.is_empty() {
                    let later = dues(&o).iter().filter(|d| **d > due).count();
                    let (slot, given) = o.insert(due, i as u32);
                    proptest::prop_assert!(given >= due);
                    if later <= LOOK_BACK {
                        proptest::prop_assert_eq!(given, due);
                    }
                    model.push((slot, i as u32));
                } else {
                    let (slot, item) = model.remove(pick % model.len());
                    let mut told = None;
                    proptest::prop_assert_eq!(o.remove(slot, |it, s| told = Some((*it, s))), Some(item));
                    if let Some((it, s)) = told {
                        let m = model.iter_mut().find(|m| m.1 == it);
                        proptest::prop_assert!(m.is_some());
                        if let Some(m) = m { m.0 = s; }
                    }
                }
                let d = dues(&o);
                proptest::prop_assert!(d.windows(2).all(|w| w[0] <= w[1]));
                let mut have = items(&o);
                let mut want: Vec<u32> = model.iter().map(|m| m.1).collect();
                have.sort();
                want.sort();
                proptest::prop_assert_eq!(have, want);
                proptest::prop_assert_eq!(o.nodes.len(), model.len());
                for (slot, item) in &model {
                    proptest::prop_assert_eq!(o.nodes[*slot].item, *item);
                }
            }
        }
    }
}
