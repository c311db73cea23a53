//! The bound leases themselves, and what a bound lease looks like on the
//! wire: replicas and the AOF hold it at a far deadline that carries its
//! ttl (`core::keep::KEPT_BASE`), while the master renews the real one
//! locally, sending nothing.

use std::cell::{Cell, RefCell};

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::keep::Bindings;
use crate::glue::blocking;

/// Renews one holder's lease on a key to `ttl` from `now`, only while it
/// still holds the grant with `fence` (when given): `NOTHELD` otherwise.
pub type Renew = fn(&Context, &RedisString, &[u8], i64, Option<u64>, i64) -> Result<(), Error>;

/// Sends one holder's current state on a key to replicas and the AOF (as
/// `wire` says a bound lease goes there).
pub type Announce = fn(&Context, &RedisString, &[u8]) -> Result<(), Error>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    pub db: i32,
    pub key: Box<[u8]>,
    pub holder: Box<[u8]>,
}

impl Lease {
    pub fn of(ctx: &Context, name: &RedisString, holder: &[u8]) -> Lease {
        Lease {
            db: blocking::selected_db(ctx),
            key: name.as_slice().into(),
            holder: holder.into(),
        }
    }
}

/// How a lease is kept: through its kind.
#[derive(Clone, Copy)]
pub struct How {
    pub renew: Renew,
    pub announce: Announce,
    pub fence: Option<u64>,
}

thread_local! {
    pub static BOUND: RefCell<Bindings<Lease, How>> = RefCell::new(Bindings::default());
    /// Set while the timer renews a bound lease: its effect stays local.
    static RENEWING: Cell<bool> = const { Cell::new(false) };
}

/// Runs a renewal of a bound lease: nothing of it reaches replicas or the
/// AOF, which hold the lease far away already.
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            RENEWING.set(false);
        }
    }
    RENEWING.set(true);
    let _reset = Reset;
    f()
}

/// How a holder's lease on a key goes to replicas and the AOF.
pub enum Wire {
    /// As it is.
    Plain,
    /// Bound with this ttl: at `core::keep::kept_deadline(ttl)`.
    Kept(i64),
    /// Not at all (a local renewal).
    Quiet,
}

pub fn wire(ctx: &Context, key: &RedisString, holder: &[u8]) -> Wire {
    if RENEWING.get() {
        return Wire::Quiet;
    }
    if BOUND.with(|b| b.try_borrow().map_or(true, |b| b.is_empty())) {
        return Wire::Plain;
    }
    let lease = Lease::of(ctx, key, holder);
    BOUND.with(|b| {
        b.try_borrow()
            .ok()
            .and_then(|b| b.binding(&lease).map(|x| x.ttl_ms))
            .map_or(Wire::Plain, Wire::Kept)
    })
}
