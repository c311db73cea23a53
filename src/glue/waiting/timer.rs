//! The engine's one module timer, and the work noted for it by callbacks
//! that may not write (unlink, flush, disconnect): keys to look at again.

use std::cell::RefCell;

use redis_module::Context;

use super::super::blocking::{self, TimerProc};
use super::super::server::now_ms;

/// Keys noted since the last timer; `all`: every key with waiters.
#[derive(Default)]
pub struct Pending {
    pub names: Vec<Vec<u8>>,
    pub all: bool,
}

const MAX_PENDING: usize = 4096;

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
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
pub fn note(names: impl IntoIterator<Item = Vec<u8>>) {
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
