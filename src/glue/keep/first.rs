//! A grant that will be bound (`KEEP`) binds its lease as it writes it:
//! the write carries the far deadline, one effect where a write and then a
//! renewal were two (each a replicated command and, for the renewal, the
//! key opened again), on the hot path of every client library, which asks
//! `KEEP` by default.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use redis_module::{Context, RedisString};

use super::bind_lease;
use super::bound::{held_at, Renew};
use crate::core::keep::kept_deadline;

#[derive(Clone, Copy)]
enum Coming {
    /// The grant being decided (of `holder` on `name`) will be bound to
    /// `client` with `ttl_ms`.
    Armed {
        name: *const [u8],
        holder: *const [u8],
        client: u64,
        ttl_ms: i64,
        renew: Renew,
    },
    /// Its write bound it (the grant with this fence, if the kind has
    /// fences): the `bind` that follows has nothing left to do.
    Bound(Option<u64>),
}

thread_local! {
    static COMING: Cell<Option<Coming>> = const { Cell::new(None) };
}

/// Whether COMING is set, in a plain static read first by every lease
/// written: in a cdylib each thread-local read is a call
/// (`__tls_get_addr`), and most acquires announce nothing. Commands run
/// on Redis' main thread only.
static ARMED: AtomicBool = AtomicBool::new(false);

fn set_coming(c: Option<Coming>) -> Option<Coming> {
    ARMED.store(c.is_some(), Relaxed);
    COMING.replace(c)
}

/// Runs `f` (one grant of `holder` on `name`, then its `bind`) with the
/// binding it will make known before the grant is written. Without a
/// client (no `KEEP`) it only runs `f`.
pub fn binding_first<R>(
    (name, holder): (&[u8], &[u8]),
    client: Option<u64>,
    ttl_ms: i64,
    renew: Renew,
    f: impl FnOnce() -> R,
) -> R {
    let Some(client) = client else {
        return f();
    };
    struct Restore(Option<Coming>);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_coming(self.0.take());
        }
    }
    let _restore = Restore(set_coming(Some(Coming::Armed {
        name,
        holder,
        client,
        ttl_ms,
        renew,
    })));
    f()
}

/// A queued request's grant of one key (`attempt`), bound when granted
/// (`bind`, the kind's own `KEEP` step) within `binding_first`: its write
/// binds it and carries the far deadline.
pub fn grant_bound<T, E>(
    first: (&[u8], &[u8]),
    (client, ttl_ms, renew): (Option<u64>, i64, Renew),
    attempt: impl FnOnce() -> Result<Option<T>, E>,
    bind: impl FnOnce(&T),
) -> Result<Option<T>, E> {
    binding_first(first, client, ttl_ms, renew, || {
        let got = attempt()?;
        if let Some(g) = &got {
            bind(g);
        }
        Ok(got)
    })
}

/// The deadline a kind writes for the holder's lease on `name` (its grant
/// with `fence`) instead of `deadline_ms`: far away when it is bound, or
/// is the grant `binding_first` announced (then bound now, with this very
/// write). Only the first lease written in that scope takes the binding.
#[inline]
pub fn write_at(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    fence: Option<u64>,
    deadline_ms: i64,
) -> i64 {
    if !ARMED.load(Relaxed) {
        return held_at(ctx, name, holder, fence, deadline_ms);
    }
    match COMING.get() {
        Some(Coming::Armed {
            name: n,
            holder: h,
            client,
            ttl_ms,
            renew,
        }) if deadline_ms > 0 && announced((n, h), name.as_slice(), holder) => {
            set_coming(Some(Coming::Bound(fence)));
            // Written here with the far deadline: no renewal to make.
            bind_lease(ctx, name, holder, client, ttl_ms, renew, fence);
            kept_deadline(ttl_ms)
        }
        _ => held_at(ctx, name, holder, fence, deadline_ms),
    }
}

/// Whether the announced grant was bound by its own write, whatever its
/// fence (a kind that reads the fence back from the key need not).
pub fn bound_by_write_any() -> bool {
    ARMED.load(Relaxed) && matches!(COMING.get(), Some(Coming::Bound(_)))
}

/// Whether the grant with `fence` was bound by its own write (see
/// `write_at`): its `bind` then does nothing more.
pub fn bound_by_write(fence: Option<u64>) -> bool {
    ARMED.load(Relaxed) && matches!(COMING.get(), Some(Coming::Bound(f)) if f == fence)
}

/// Whether the lease written is the one announced (another written in the
/// same scope, say a lease thawed on the way, is not bound).
fn announced((n, h): (*const [u8], *const [u8]), name: &[u8], holder: &[u8]) -> bool {
    // SAFETY: both point into the arguments of the `binding_first` call
    // whose scope is running (COMING is restored when it ends).
    unsafe { *n == *name && *h == *holder }
}
