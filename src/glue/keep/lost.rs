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

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::os::raw::c_void;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use redis_module::{raw, Context, RedisString};

use crate::core::hash::Map;
use crate::glue::blocking::{self, OneShot, Reply};
use crate::glue::mailbox::{self, Mail};
use crate::glue::server::now_ms;

use super::bound::KeyAt;

/// A hold whose binding ended: who, the mailbox its loss goes to, and when
/// it is looked at next (once its lease was written: `due`).
struct Unheld {
    holder: Box<[u8]>,
    mail: Rc<Mail>,
    due: Option<i64>,
}

/// Holds whose binding ended, by key.
type Unbound = Map<KeyAt, Vec<Unheld>>;

/// When the holder's lease at a key (in the selected database) ends; None:
/// it holds nothing there. Each kind's, from above (`kinds::lease_end`).
pub type LeaseEnd = fn(&Context, &RedisString, &[u8]) -> Option<i64>;

/// The unbound holds by when they are looked at, earliest first: one
/// entry per hold at most (a hold bound and unbound again moves its own),
/// so it is bounded by the holds themselves.
type Due = BTreeSet<(i64, KeyAt, Box<[u8]>)>;

/// Unbound holds looked at per timer turn.
const BATCH: usize = 1000;

/// What `LeaseEnd` answers for a lease that does not end.
pub const NO_END: i64 = i64::MAX;

/// A holder's stored deadline as `LeaseEnd` answers it (0, as an effect
/// may write it: no end).
pub fn end_of(deadline_ms: i64) -> i64 {
    if deadline_ms > 0 {
        deadline_ms
    } else {
        NO_END
    }
}

thread_local! {
    /// The mailbox a binding made now reports its loss to: set around a
    /// command or a grant that named one.
    static LOSSES_TO: RefCell<Option<Rc<Mail>>> = const { RefCell::new(None) };
    static UNBOUND: RefCell<Unbound> = RefCell::new(Map::default());
    /// A hold's lease can run out in a key that stays (a semaphore's or a
    /// read-write lock's other holders keep it): nothing removes a key
    /// then, so each unbound hold is looked at when its lease ends.
    static DUE: RefCell<Due> = const { RefCell::new(BTreeSet::new()) };
    static TIMER: OneShot = const { OneShot::new() };
    static LEASE_END: Cell<Option<LeaseEnd>> = const { Cell::new(None) };
}

pub fn init(ctx: &Context, lease_end: LeaseEnd) {
    TIMER.with(|t| t.init(ctx, fire));
    LEASE_END.set(Some(lease_end));
}

/// The unbound hold of `holder` on `key` was given a lease ending `at`:
/// if it is still unbound then, and its lease over, its loss is told.
pub fn due(key: KeyAt, holder: &[u8], at: i64) {
    let before = UNBOUND.with(|u| {
        let mut u = u.try_borrow_mut().ok()?;
        let h = u.get_mut(&key)?.iter_mut().find(|h| *h.holder == *holder)?;
        Some(h.due.replace(at))
    });
    let Some(before) = before else {
        return; // bound again or released meanwhile
    };
    DUE.with(|d| {
        let mut d = d.borrow_mut();
        if let Some(t) = before {
            d.remove(&(t, key.clone(), holder.into()));
        }
        d.insert((at, key, holder.into()));
    });
    TIMER.with(|t| t.arm(at));
}

/// Takes `holder`'s look at `at` out of the order.
fn undue(at: Option<i64>, key: &KeyAt, holder: &[u8]) {
    if let Some(t) = at {
        DUE.with(|d| d.borrow_mut().remove(&(t, key.clone(), holder.into())));
    }
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || look(&ctx));
}

/// Tells the losses of unbound holds whose lease ended; a lease that was
/// moved (a plain extend) is looked at again when it ends.
fn look(ctx: &Context) {
    let Some(lease_end) = LEASE_END.get() else {
        return;
    };
    if !blocking::is_master(ctx) {
        return DUE.with(|d| d.borrow_mut().clear());
    }
    let now = now_ms();
    for _ in 0..BATCH {
        let next = DUE.with(|d| {
            let mut d = d.borrow_mut();
            let first = d.first().is_some_and(|(at, _, _)| *at <= now);
            first.then(|| d.pop_first()).flatten()
        });
        let Some((_, key, holder)) = next else {
            break;
        };
        let known = UNBOUND.with(|u| {
            let Ok(mut u) = u.try_borrow_mut() else {
                return false;
            };
            let h = u
                .get_mut(&key)
                .and_then(|hs| hs.iter_mut().find(|h| *h.holder == *holder));
            h.map(|h| h.due = None).is_some()
        });
        if !known {
            continue;
        }
        let end = blocking::in_db(ctx, key.0, || {
            lease_end(
                ctx,
                &RedisString::create_from_slice(ctx.ctx, &key.1),
                &holder,
            )
        });
        match end {
            // A lease without an end (a key a client made persistent) is
            // looked at again only once its binding ends again.
            Some(NO_END) => {}
            Some(at) if at > now => due(key, &holder, at),
            _ => {
                if let Some(mail) = holder_gone(&key, &holder) {
                    tell([mail], "removed");
                }
            }
        }
    }
    if let Some(at) = DUE.with(|d| d.borrow().first().map(|(at, _, _)| *at)) {
        TIMER.with(|t| t.arm(at.max(now)));
    }
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
/// told if the key goes before it is bound again or released (or, once
/// its lease is written, when that lease ends: `due`).
pub fn unbound(key: KeyAt, holder: &[u8], mail: Rc<Mail>) {
    // An earlier unbinding of the same hold is replaced, its look too.
    holder_gone(&key, holder);
    UNBOUND.with(|u| {
        u.borrow_mut().entry(key).or_default().push(Unheld {
            holder: holder.into(),
            mail,
            due: None,
        });
    });
}

/// The holder's hold on `key` is bound again or released: nothing to tell.
pub fn settled(key: &KeyAt, holder: &[u8]) {
    holder_gone(key, holder);
}

/// The holder's hold on `key` ended, or needs telling no more: the
/// mailbox to tell, if its binding had ended with one.
pub fn holder_gone(key: &KeyAt, holder: &[u8]) -> Option<Rc<Mail>> {
    let h = UNBOUND.with(|u| {
        let mut u = u.try_borrow_mut().ok()?;
        let holds = u.get_mut(key)?;
        let at = holds.iter().position(|h| *h.holder == *holder)?;
        let h = holds.swap_remove(at);
        if holds.is_empty() {
            u.remove(key);
        }
        Some(h)
    })?;
    undue(h.due, key, holder);
    Some(h.mail)
}

/// The key went: the holds on it that had lost their binding are lost.
pub fn key_gone(key: &KeyAt) -> Vec<Rc<Mail>> {
    let holds = UNBOUND.with(|u| {
        let Ok(mut u) = u.try_borrow_mut() else {
            return vec![];
        };
        if u.is_empty() {
            return vec![];
        }
        u.remove(key).unwrap_or_default()
    });
    mails_of(key, holds)
}

/// Databases went (a flush, a swap): as `key_gone` for each of their keys.
pub fn keys_gone(mut gone: impl FnMut(&KeyAt) -> bool) -> Vec<Rc<Mail>> {
    let went: Vec<(KeyAt, Vec<Unheld>)> = UNBOUND.with(|u| {
        let Ok(mut u) = u.try_borrow_mut() else {
            return vec![];
        };
        let keys: Vec<KeyAt> = u.keys().filter(|k| gone(k)).cloned().collect();
        keys.into_iter()
            .filter_map(|k| u.remove(&k).map(|hs| (k, hs)))
            .collect()
    });
    went.into_iter()
        .flat_map(|(k, hs)| mails_of(&k, hs))
        .collect()
}

/// The mailboxes of holds that went with `key`, their looks taken out.
fn mails_of(key: &KeyAt, holds: Vec<Unheld>) -> Vec<Rc<Mail>> {
    holds
        .into_iter()
        .map(|h| {
            undue(h.due, key, &h.holder);
            h.mail
        })
        .collect()
}

/// This server became a replica: it tells nothing any more.
pub fn clear() {
    UNBOUND.with(|u| u.borrow_mut().clear());
    DUE.with(|d| d.borrow_mut().clear());
}
