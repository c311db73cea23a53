//! The one panic guard every entry point from the server goes through
//! (command bodies, type callbacks, events, timers, blocked-client
//! callbacks, `INFO`). A panic that unwound into Redis would abort the
//! server and every client with it; here it is logged (by the hook set at
//! load) and the entry point returns its fallback instead.

use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn call<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("padlock: internal error in a callback, see the panic above");
            fallback
        }
    }
}
