//! The engine's one module timer, and the work noted for it by callbacks
//! that may not write (unlink, flush, disconnect): keys to look at again.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use redis_module::{raw, Context};

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
    /// The armed timer: (id, fires at unix ms).
    static TIMER: Cell<Option<(u64, i64)>> = const { Cell::new(None) };
}

/// A context for arming timers from callbacks that have none.
static TIMER_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());
static FIRE: OnceLock<TimerProc> = OnceLock::new();

pub fn init(ctx: &Context, fire: TimerProc) {
    TIMER_CTX.store(blocking::detached_context(ctx), Ordering::Relaxed);
    let _ = FIRE.set(fire);
}

/// Makes sure the timer fires at `at` (unix ms) or earlier.
pub fn arm(at: i64) {
    let ctx = Context::new(TIMER_CTX.load(Ordering::Relaxed));
    let Some(fire) = FIRE.get() else {
        return;
    };
    if ctx.ctx.is_null() {
        return;
    }
    if let Some((id, when)) = TIMER.get() {
        if when <= at {
            return;
        }
        blocking::stop_timer(&ctx, id);
    }
    let id = blocking::start_timer(&ctx, at - now_ms(), *fire);
    TIMER.set(Some((id, at)));
}

/// The timer fired: it is no longer armed.
pub fn fired() {
    TIMER.set(None);
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
