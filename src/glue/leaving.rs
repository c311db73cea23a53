//! Slots this node is moving away by atomic slot migration, while the move
//! runs. A mailbox moves with its slot: once ownership moved, a post this
//! node made to it could only create a stray key here, one the new owner
//! never sees. So while a slot leaves, everything that would post to one
//! of its mailboxes later is settled when the move begins (`waiting`'s
//! queued mailbox waits, `keep`'s bindings that report losses there), and
//! a request naming a mailbox of it is refused with `-TRYAGAIN`: its
//! caller asks again, on the new owner once the slot moved.

use std::cell::RefCell;

use crate::core::cluster;
use crate::core::error::Error;

thread_local! {
    /// Slot ranges of the moves in progress (a few at most).
    static LEAVING: RefCell<Vec<(u16, u16)>> = const { RefCell::new(Vec::new()) };
}

/// A move of `ranges` away began.
pub fn began(ranges: &[(u16, u16)]) {
    LEAVING.with(|m| m.borrow_mut().extend_from_slice(ranges));
}

/// A move of `ranges` ended (done or given up).
pub fn ended(ranges: &[(u16, u16)]) {
    LEAVING.with(|m| m.borrow_mut().retain(|r| !ranges.contains(r)));
}

/// Whether `key`'s slot is leaving this node.
pub fn has(key: &[u8]) -> bool {
    LEAVING.with(|m| {
        let m = m.borrow();
        if m.is_empty() {
            return false;
        }
        let slot = cluster::key_slot(key);
        m.iter().any(|&(a, b)| (a..=b).contains(&slot))
    })
}

/// A request naming a mailbox of `key`'s slot: refused while it leaves.
pub fn check(key: &[u8]) -> Result<(), Error> {
    if has(key) {
        return Err(Error::SlotMoving);
    }
    Ok(())
}
