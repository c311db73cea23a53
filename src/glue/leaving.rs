//! Slots this node is moving away by atomic slot migration, while the move
//! runs. A mailbox moves with its slot: once ownership moved, a post this
//! node made to it could only create a stray key here, one the new owner
//! never sees. So while a slot leaves, everything that would post to one
//! of its mailboxes later is settled when the move begins (`waiting`'s
//! queued mailbox waits, `keep`'s bindings that report losses there), and
//! a request naming a mailbox of it is refused with `-TRYAGAIN`: its
//! caller asks again, on the new owner once the slot moved.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::core::cluster;
use crate::core::error::Error;

thread_local! {
    /// Slot ranges of the moves in progress (a few at most).
    static LEAVING: RefCell<Vec<(u16, u16)>> = const { RefCell::new(Vec::new()) };
}

/// Whether LEAVING holds any range, in a plain static: every mailbox
/// request asks, and almost always none leaves (a thread-local read is a
/// call in a cdylib).
static ANY: AtomicBool = AtomicBool::new(false);

/// A move of `ranges` away began.
pub fn began(ranges: &[(u16, u16)]) {
    LEAVING.with(|m| {
        let mut m = m.borrow_mut();
        m.extend_from_slice(ranges);
        ANY.store(!m.is_empty(), Relaxed);
    });
}

/// A move of `ranges` ended (done or given up).
pub fn ended(ranges: &[(u16, u16)]) {
    LEAVING.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|r| !ranges.contains(r));
        ANY.store(!m.is_empty(), Relaxed);
    });
}

/// Whether `key`'s slot is leaving this node.
pub fn has(key: &[u8]) -> bool {
    ANY.load(Relaxed) && LEAVING.with(|m| cluster::in_ranges(&m.borrow(), key))
}

/// A request naming a mailbox of `key`'s slot: refused while it leaves.
pub fn check(key: &[u8]) -> Result<(), Error> {
    if has(key) {
        return Err(Error::SlotMoving);
    }
    Ok(())
}
