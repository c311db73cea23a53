//! The bound leases themselves, and the deadline a bound lease is written
//! with: far away, carrying its ttl (`core::keep::KEPT_BASE`), on the
//! master as on its replicas and in its files, so that it needs no renewal.

use std::cell::RefCell;

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::keep::{kept_deadline, Bindings, OnKey};
use crate::glue::blocking;

/// Sets one holder's lease on a key to `ttl` from `now` (far away while
/// it is bound), only while it still holds the grant with `fence` (when
/// given): `NOTHELD` otherwise.
pub type Renew = fn(&Context, &RedisString, &[u8], i64, Option<u64>, i64) -> Result<(), Error>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    pub db: i32,
    pub key: Box<[u8]>,
    pub holder: Box<[u8]>,
}

/// A key as bindings name it: (database, name).
pub type KeyAt = (i32, Box<[u8]>);

impl OnKey for Lease {
    type Key = KeyAt;
    fn on_key(&self) -> KeyAt {
        (self.db, self.key.clone())
    }
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

/// How a lease is written again when its binding ends: through its kind;
/// and the mailbox told when its hold is lost.
#[derive(Clone)]
pub struct How {
    pub renew: Renew,
    pub fence: Option<u64>,
    pub mail: Option<std::rc::Rc<crate::glue::mailbox::Mail>>,
}

/// Every binding of this server.
pub type Bound = Bindings<Lease, How>;

thread_local! {
    pub static BOUND: RefCell<Bound> = RefCell::new(Bindings::default());
}

/// Is any lease bound? (Most servers: none, and then nothing more is read.)
pub fn any_bound() -> bool {
    BOUND.with(|b| !b.borrow().is_empty())
}

/// The lease to look up, when any is bound at all (naming it allocates).
pub fn lease_if_any(ctx: &Context, name: &RedisString, holder: &[u8]) -> Option<Lease> {
    any_bound().then(|| Lease::of(ctx, name, holder))
}

/// The deadline to write for the holder's lease (its grant with `fence`,
/// when the kind has fences) instead of `deadline_ms`: far away while the
/// lease is bound to a connection.
#[inline]
pub fn held_at(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    fence: Option<u64>,
    deadline_ms: i64,
) -> i64 {
    let Some(lease) = lease_if_any(ctx, name, holder).filter(|_| deadline_ms > 0) else {
        return deadline_ms;
    };
    BOUND.with(|b| {
        b.borrow()
            .binding(&lease)
            .filter(|x| x.payload.fence.is_none() || fence.is_none() || x.payload.fence == fence)
            .map_or(deadline_ms, |x| kept_deadline(x.ttl_ms))
    })
}
