//! The restart grace as an operator sees it: a log line when it starts
//! and when it ends (also when `CONFIG SET padlock.restart-grace-ms 0`
//! ends it early), `INFO padlock` fields, and waiters held back by it
//! served the moment it ends. The rule itself is `core::grace`; when it
//! runs is `config`.

use std::cell::Cell;
use std::os::raw::c_void;
use std::sync::atomic::Ordering;

use redis_module::{logging, raw, Context};

use super::config::{GRACE_FROM_MS, MAX_TTL_MS, RESTART_GRACE};
use super::server::now_ms;
use super::timer;
use crate::core::grace::Grace;

thread_local! {
    /// Whether the last look found the grace running (so each start and
    /// end is logged once).
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

pub fn init(ctx: &Context) {
    timer::grace_init(ctx, fire);
    // After OnLoad, once the load-time settings are in.
    timer::grace_changed();
}

/// (running, ms it may still refuse some request) now.
pub fn status(now: i64) -> (bool, i64) {
    let left = RESTART_GRACE.get().left_ms(
        GRACE_FROM_MS.load(Ordering::Relaxed),
        MAX_TTL_MS.load(Ordering::Relaxed),
        now,
    );
    (left > 0, left)
}

unsafe extern "C" fn fire(_ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    super::guard::call((), || {
        let now = now_ms();
        let (running, left) = status(now);
        let was = RUNNING.replace(running);
        if running && !was {
            let how = match RESTART_GRACE.get() {
                Grace::Auto => "each request's own ttl-ms (auto)".to_string(),
                g => format!("{} ms", g.render()),
            };
            logging::log_notice(format!(
                "padlock: restart grace running for {how}: free locks and permits are refused \
                 with -TRYAGAIN for up to {left} ms more, since a holder from before a restart \
                 that lost data may still be working; on a server known to be new, end it with \
                 CONFIG SET padlock.restart-grace-ms 0"
            ));
        } else if was && !running {
            logging::log_notice("padlock: restart grace ended: free locks are granted again");
            // Waiters it held back are served at once.
            timer::note_all();
        }
        timer::grace_fired(running.then_some(now + left));
    })
}

/// For `INFO padlock`.
pub fn fields(now: i64) -> [(&'static str, i64); 2] {
    let (running, left) = status(now);
    [
        ("grace_active", i64::from(running)),
        ("grace_left_ms", left),
    ]
}
