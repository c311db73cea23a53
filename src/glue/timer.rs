//! The waiting engine's one module timer, and the work noted for it by
//! callbacks that may not write (a type's unlink, flush, disconnect): keys
//! to look at again. It sits below both the data types and the engine, so
//! a type's unlink callback notes a removed key here without knowing the
//! engine; the engine says whether anyone waits (`set_watching`), so that
//! removals of keys nobody waits for cost nothing.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use redis_module::Context;

use super::blocking::{self, TimerProc};
use super::server::now_ms;

/// Keys noted since the last timer; `all`: every key with waiters.
#[derive(Default)]
pub struct Pending {
    pub names: Vec<Rc<[u8]>>,
    pub all: bool,
}

const MAX_PENDING: usize = 4096;

/// What is done when the key `name` of database `db` goes.
type Gone = fn(i32, &[u8], bool);

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
    /// Whether any client waits (kept by the engine).
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// What is done when a key goes (`keep::removed`,
    /// `requests::key_gone`), registered by them: the types note removals
    /// here without knowing either.
    static ON_GONE: Cell<[Option<Gone>; 2]> = const { Cell::new([None; 2]) };
}

/// A hook for a key that went (from OnLoad): `KEEP`'s and the request
/// memory's.
pub fn on_gone(f: Gone) {
    let mut hooks = ON_GONE.get();
    if let Some(slot) = hooks.iter_mut().find(|h| h.is_none()) {
        *slot = Some(f);
    }
    ON_GONE.set(hooks);
}

/// The key `name` of database `db` went, by any hand (`on_purpose`:
/// padlock's own delete, whose request says itself what it freed): what
/// was bound to its holds ends, and its request-ids count among those of
/// freed keys.
pub fn gone(db: i32, name: &[u8], on_purpose: bool) {
    for f in ON_GONE.get().into_iter().flatten() {
        f(db, name, on_purpose);
    }
}

/// The engine, after each change of its state: does anyone wait now?
pub fn set_watching(any: bool) {
    WATCHING.set(any);
}

/// A padlock key was removed by another hand (DEL, UNLINK, expiry,
/// eviction), or its expiry moved: its waiters need a look at the next
/// timer. Nothing to do while nobody waits.
pub fn note_removed(name: &[u8]) {
    if WATCHING.get() {
        note([Rc::from(name)]);
    }
}

pub fn init(ctx: &Context, fire: TimerProc) {
    TIMER.with(|t| t.init(ctx, fire));
}

/// Makes sure the timer fires at `at` (unix ms) or earlier.
pub fn arm(at: i64) {
    TIMER.with(|t| t.arm(at));
}

/// The timer fired: it is no longer armed.
pub fn fired() {
    TIMER.with(|t| t.fired());
}

/// Notes keys to look at on the next timer, which is armed for now.
pub fn note(names: impl IntoIterator<Item = Rc<[u8]>>) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        for n in names {
            if p.names.len() >= MAX_PENDING {
                p.all = true;
                break;
            }
            p.names.push(n);
        }
    });
    arm(now_ms());
}

/// Notes that every key with waiters needs a look (a flush).
pub fn note_all() {
    PENDING.with(|p| p.borrow_mut().all = true);
    arm(now_ms());
}

pub fn take_pending() -> Pending {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

thread_local! {
    /// The restart grace's own timer (`grace`), armed from the settings
    /// below it.
    static GRACE_TIMER: blocking::OneShot = const { blocking::OneShot::new() };
}

/// From OnLoad: the grace's timer callback.
pub fn grace_init(ctx: &Context, fire: TimerProc) {
    GRACE_TIMER.with(|t| t.init(ctx, fire));
}

/// The grace (re)started or its setting changed: looked at now.
pub fn grace_changed() {
    GRACE_TIMER.with(|t| t.arm(now_ms()));
}

/// The grace's timer fired; `at`: when to look again, if at all.
pub fn grace_fired(at: Option<i64>) {
    GRACE_TIMER.with(|t| {
        t.fired();
        if let Some(at) = at {
            t.arm(at);
        }
    });
}
