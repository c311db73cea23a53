//! Losses told to a mailbox: a hold bound with `KEEP` through a request
//! that named a mailbox (`... BLOCK t MAILBOX mb KEEP`, or `... EXTEND
//! ... KEEP MAILBOX mb`) whose hold ends in any way but its own release
//! gets `<request-id> -LOST <why>` appended there, so its client learns at
//! once instead of at its next extend.
//!
//! While bound, a hold ends only with its key (a delete, an overwrite, a
//! flush, a swap, an eviction, a migration away: every binding on the key
//! ends with it). After its binding ended (the connection closed or went
//! silent) the hold runs out one ttl later unless bound again: such holds
//! are remembered here, by key, until bound again, released, or gone.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::core::hash::Map;
use crate::glue::blocking::Reply;
use crate::glue::mailbox::{self, Mail};

use super::bound::KeyAt;

/// Holds whose binding ended, by key: holder and mailbox.
type Unbound = Map<KeyAt, Vec<(Box<[u8]>, Rc<Mail>)>>;

thread_local! {
    /// The mailbox a binding made now reports its loss to: set around a
    /// command or a grant that named one.
    static LOSSES_TO: RefCell<Option<Rc<Mail>>> = const { RefCell::new(None) };
    static UNBOUND: RefCell<Unbound> = RefCell::new(Map::default());
}

/// Whether LOSSES_TO is set, in a plain static: every acquire granted at
/// once asks (see `first::ARMED`), and most name no mailbox.
static SCOPED: AtomicBool = AtomicBool::new(false);

/// Whether any hold that lost its binding is remembered (most servers:
/// none, and a removed key is not looked up).
pub fn any() -> bool {
    UNBOUND.with(|u| u.try_borrow().map_or(true, |u| !u.is_empty()))
}

/// Runs `f` with bindings it makes reporting their loss to `mail`.
/// Without one, bindings made in `f` report to no mailbox, whatever scope
/// `f` runs in (a blocked waiter granted inside another's command).
#[inline]
pub fn losses_to<R>(mail: Option<Mail>, f: impl FnOnce() -> R) -> R {
    if mail.is_none() && !SCOPED.load(Relaxed) {
        return f();
    }
    struct Restore(Option<Rc<Mail>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_losses_to(self.0.take());
        }
    }
    let _restore = Restore(set_losses_to(mail.map(Rc::new)));
    f()
}

fn set_losses_to(mail: Option<Rc<Mail>>) -> Option<Rc<Mail>> {
    SCOPED.store(mail.is_some(), Relaxed);
    LOSSES_TO.with(|l| std::mem::replace(&mut *l.borrow_mut(), mail))
}

/// The mailbox of a binding being made now.
pub fn current() -> Option<Rc<Mail>> {
    if !SCOPED.load(Relaxed) {
        return None;
    }
    LOSSES_TO.with(|l| l.borrow().clone())
}

/// Tells each mailbox its hold is lost (from wherever: posted at the next
/// timer pass that may write).
pub fn tell(mails: impl IntoIterator<Item = Rc<Mail>>, why: &str) {
    let reply = Reply::Error(format!("LOST {why}"));
    for m in mails {
        let e = mailbox::element(&m.rid, &reply);
        mailbox::later((*m).clone(), e);
    }
}

/// A binding with a mailbox ended with its hold still there: its loss is
/// told if the key goes before it is bound again or released.
pub fn unbound(key: KeyAt, holder: &[u8], mail: Rc<Mail>) {
    UNBOUND.with(|u| {
        let mut u = u.borrow_mut();
        let holds = u.entry(key).or_default();
        holds.retain(|(h, _)| **h != *holder);
        holds.push((holder.into(), mail));
    });
}

/// The holder's hold on `key` is bound again or released: nothing to tell.
pub fn settled(key: &KeyAt, holder: &[u8]) {
    UNBOUND.with(|u| {
        let Ok(mut u) = u.try_borrow_mut() else {
            return;
        };
        if u.is_empty() {
            return;
        }
        if let Some(holds) = u.get_mut(key) {
            holds.retain(|(h, _)| **h != *holder);
            if holds.is_empty() {
                u.remove(key);
            }
        }
    });
}

/// The key went: the holds on it that had lost their binding are lost.
pub fn key_gone(key: &KeyAt) -> Vec<Rc<Mail>> {
    UNBOUND.with(|u| {
        let Ok(mut u) = u.try_borrow_mut() else {
            return vec![];
        };
        if u.is_empty() {
            return vec![];
        }
        u.remove(key)
            .map(|holds| holds.into_iter().map(|(_, m)| m).collect())
            .unwrap_or_default()
    })
}

/// Databases went (a flush, a swap): as `key_gone` for each of their keys.
pub fn keys_gone(mut gone: impl FnMut(&KeyAt) -> bool) -> Vec<Rc<Mail>> {
    UNBOUND.with(|u| {
        let Ok(mut u) = u.try_borrow_mut() else {
            return vec![];
        };
        let keys: Vec<KeyAt> = u.keys().filter(|k| gone(k)).cloned().collect();
        keys.iter()
            .flat_map(|k| u.remove(k).unwrap_or_default())
            .map(|(_, m)| m)
            .collect()
    })
}

/// This server became a replica: it tells nothing any more.
pub fn clear() {
    UNBOUND.with(|u| u.borrow_mut().clear());
}
