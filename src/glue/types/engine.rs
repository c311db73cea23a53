//! What the waiting engine reads of any of padlock's values, whatever its
//! kind: who holds it, whom a request waits for, when it may free itself.

use crate::core::since::Since;
use crate::core::waitgraph::{Held, Need};

/// What the waiting engine needs to know of any stored value.
pub trait Stored {
    /// Who holds it at `now_ms` (for `LOCK.GRAPH` and `LOCK.WAITFOR`), as
    /// a request that needs the key alone waits for them.
    fn held(&self, now_ms: i64) -> Held;
    /// Each holder `held` names, uncopied (`LOCK.GRAPH` replies them).
    fn each_holder(&self, now_ms: i64, f: &mut dyn FnMut(&[u8]));
    /// Whom a request of `waiter` that needs `need` waits for among the
    /// holders (a reader of a read-write lock only for its writer).
    fn held_for(&self, _waiter: &[u8], _need: Need, now_ms: i64) -> Held {
        self.held(now_ms)
    }
    /// Whether `held_for` is `held` for every request: a refusal then
    /// reads the holders once. Each kind answers its `KindInfo::all_conflict`.
    fn held_alike(&self) -> bool;
    /// When it may next free itself, given the key's own expiry.
    fn frees_at(&self, key_expire: Option<i64>) -> Option<i64>;
    /// Whether a holder's own lease is held far away (`KEEP`) while the
    /// key's expiry may say otherwise (a client's `PERSIST`): only kinds
    /// with a lease per holder can.
    fn holds_kept(&self) -> bool {
        false
    }
    /// Its holds' starts and lease ends (0: the key's own expiry), for the
    /// hold percentiles when the key expires.
    fn spans(&self) -> Vec<(Since, i64)>;
}
