//! `KEEP`: leases the server keeps while the holder's connection lives.
//! The bookkeeping is `core::keep`. A bound lease is written once, at a far
//! deadline that carries its ttl (`bound::held_at`), on the master and so
//! on its replicas and in its files: it costs nothing while bound, and a
//! copy anywhere is right if the master dies now. When the binding ends
//! (the connection closed or went silent: `renew`), the lease gets a full
//! ttl, written and sent with its real deadline. A server that serves
//! leases held far away with no binding (a promoted replica, a restart, a
//! slot's new owner, a key renamed or copied) gives each its ttl from then
//! (`thaw`). Bindings themselves are neither persisted nor replicated.

mod bound;
mod first;
mod lost;
mod thaw;
mod unbind;

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use redis_module::{Context, ContextFlags, RedisString};

use super::config;
use super::key::Key;
use super::server::now_ms;
use crate::core::error::Error;
use crate::core::keep::kept_ttl;
use bound::{How, KeyAt, Lease, BOUND};

pub use bound::{any_bound, held_at, Renew};
pub use first::{binding_first, grant_bound, write_at};
pub use lost::losses_to;
pub use lost::{end_of, LeaseEnd, NO_END};
pub use thaw::Thaw;

pub fn init(ctx: &Context, (thaw, lease_end): (Thaw, LeaseEnd)) {
    super::timer::on_gone(removed);
    unbind::init(ctx);
    thaw::init(ctx, thaw);
    lost::init(ctx, lease_end);
}

/// The connection a `KEEP` binds to; None without `KEEP`. A script has no
/// connection of its own that could close, so `KEEP` is refused there; so
/// is a ttl below 3 x `keep-min-interval-ms` (the documented floor), rather
/// than lost.
pub fn client(ctx: &Context, keep: bool, ttl_ms: i64) -> Result<Option<u64>, Error> {
    if !keep {
        return Ok(None);
    }
    // SAFETY: live context.
    let id = unsafe { rm!(RedisModule_GetClientId)(ctx.ctx) };
    if id == 0 || ctx.get_flags().contains(ContextFlags::LUA) {
        return Err(Error::Invalid(
            "KEEP needs a client connection, not a script",
        ));
    }
    let min = 3 * config::KEEP_MIN_INTERVAL_MS.load(Ordering::Relaxed);
    if ttl_ms < min {
        return Err(Error::KeepTooShort { min });
    }
    Ok(Some(id))
}

/// Binds the holder's lease on `name` (in the selected database) to
/// `client`; the latest binding of a lease wins. Unless it was bound with
/// this ttl already (the command then wrote it far away), the lease is
/// written far away now.
pub fn bind(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: u64,
    ttl_ms: i64,
    renew: Renew,
    fence: Option<u64>,
) {
    if first::bound_by_write(fence) {
        return;
    }
    // An error: the hold is gone again; nothing to write.
    if bind_lease(ctx, name, holder, client, ttl_ms, renew, fence)
        && renew(ctx, name, holder, ttl_ms, fence, now_ms()).is_ok()
    {
        super::info::bump(&super::info::KEEP_RENEWALS);
    }
}

/// The binding itself; true when the lease must be written far away now:
/// unless it was bound before to this very hold with this ttl (the command
/// wrote it far away already). A binding of another hold (another fence)
/// never counts: this one is written now.
fn bind_lease(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: u64,
    ttl_ms: i64,
    renew: Renew,
    fence: Option<u64>,
) -> bool {
    settle();
    let lease = Lease::of(ctx, name, holder);
    if lost::any() {
        lost::settled(&(lease.db, lease.key.clone()), holder);
    }
    let how = How {
        renew,
        fence,
        mail: lost::current(),
    };
    let before = BOUND.with(|b| b.borrow_mut().bind(lease, client, ttl_ms, how));
    unbind::bound_one(client);
    before.map(|b| (b.ttl_ms, b.payload.fence)) != Some((ttl_ms, fence))
}

/// Binds the lease the holder has now (after a reentry or an extend), if
/// `fence_of` finds its grant's fence in the key; without `KEEP` (the
/// usual case) the key is not read again.
pub fn bind_held(
    ctx: &Context,
    name: &RedisString,
    holder: &[u8],
    client: Option<u64>,
    ttl_ms: i64,
    renew: Renew,
    fence_of: impl FnOnce(&mut Key) -> Option<u64>,
) {
    let Some(c) = client else {
        return;
    };
    // Bound by the grant's own write (`first`): nothing to read.
    if first::bound_by_write_any() {
        return;
    }
    let fence = fence_of(&mut Key::read(ctx, name));
    if let Some(f) = fence {
        bind(ctx, name, holder, c, ttl_ms, renew, Some(f));
    }
}

/// The holder's last hold on `name` is gone: its binding ends.
pub fn unbind(ctx: &Context, name: &RedisString, holder: &[u8]) {
    if let Some(lease) = bound::lease_if_any(ctx, name, holder) {
        BOUND.with(|b| b.borrow_mut().unbind(&lease));
    }
    // (Naming the key copies it: only when a loss is waiting to be told.)
    if lost::any() {
        let key = (super::blocking::selected_db(ctx), name.as_slice().into());
        lost::settled(&key, holder);
    }
}

pub fn is_bound(ctx: &Context, name: &RedisString, holder: &[u8]) -> bool {
    settle();
    bound::lease_if_any(ctx, name, holder).is_some_and(|l| BOUND.with(|b| b.borrow().is_bound(&l)))
}

thread_local! {
    /// Keys that went while the bindings were busy (a removal noted from
    /// inside a callback): their bindings end before the next look.
    static GONE: RefCell<Vec<Gone>> = const { RefCell::new(Vec::new()) };
}

enum Gone {
    /// A key, and whether padlock removed it itself (a release).
    Key(KeyAt, bool),
    Dbs(Option<i32>, Option<i32>),
}

/// Ends the bindings of keys noted as gone while the bindings were busy.
fn settle() {
    if GONE.with(|g| g.borrow().is_empty()) {
        return;
    }
    let gone = GONE.with(|g| std::mem::take(&mut *g.borrow_mut()));
    let ended: Vec<_> = BOUND.with(|b| {
        let mut b = b.borrow_mut();
        gone.into_iter().map(|g| (g.end(&mut b), g)).collect()
    });
    for (mails, g) in ended {
        g.tell(mails);
    }
}

impl Gone {
    /// Ends the bindings on what went; the mailboxes of the holds it took
    /// (bound or not) are returned, to be told.
    fn end(&self, b: &mut bound::Bound) -> Vec<std::rc::Rc<crate::glue::mailbox::Mail>> {
        let (ended, unbound) = match self {
            Gone::Key(k, _) => (b.drop_key(k), lost::key_gone(k)),
            Gone::Dbs(x, y) => (
                b.drop_keys(|(db, _)| db_matches(*db, *x, *y)),
                lost::keys_gone(|(db, _)| db_matches(*db, *x, *y)),
            ),
        };
        ended
            .into_iter()
            .filter_map(|x| x.payload.mail)
            .chain(unbound)
            .collect()
    }

    /// Tells the mailboxes their holds are lost (padlock's own delete, a
    /// release, tells none).
    fn tell(&self, mails: Vec<std::rc::Rc<crate::glue::mailbox::Mail>>) {
        let why = match self {
            Gone::Key(_, true) => return,
            Gone::Key(_, false) => "removed",
            Gone::Dbs(None, _) => "flushed",
            Gone::Dbs(Some(_), None) => "flushed",
            Gone::Dbs(Some(_), Some(_)) => "swapped",
        };
        if !mails.is_empty() {
            lost::tell(mails, why);
        }
    }
}

/// `x`/`y` name databases; None in `x` names every one.
fn db_matches(db: i32, x: Option<i32>, y: Option<i32>) -> bool {
    x.is_none() || x == Some(db) || y == Some(db)
}

fn end(g: Gone) {
    let done = BOUND.with(|b| {
        let Ok(mut b) = b.try_borrow_mut() else {
            return None;
        };
        Some(g.end(&mut b))
    });
    match done {
        Some(mails) => g.tell(mails),
        None => GONE.with(|q| q.borrow_mut().push(g)),
    }
}

/// The key `name` of database `db` went (deleted, overwritten, expired,
/// evicted, renamed or moved away, trimmed): the bindings of its holds
/// end, and nothing is written for them (the holds are gone with it).
/// Called from the types' unlink callback, so it only touches memory.
pub fn removed(db: i32, name: &[u8], on_purpose: bool) {
    // Checked before the key's name is copied: most servers bind nothing.
    if any_bound() || lost::any() {
        end(Gone::Key((db, name.into()), on_purpose));
    }
}

/// `FLUSHDB` (`Some(db)`) or `FLUSHALL` (None): every binding of those
/// keys ends.
pub fn flushed(db: Option<i32>) {
    if any_bound() || lost::any() {
        end(Gone::Dbs(db, None));
    }
}

/// `SWAPDB a b`: the keys of both databases moved away from their
/// bindings, which end; what is held far away is thawed where it is now.
pub fn swapped(a: i32, b: i32) {
    end(Gone::Dbs(Some(a), Some(b)));
    thaw_all();
}

/// A client set the key's expiry by hand (`PEXPIRE`, `EXPIREAT`,
/// `PERSIST`, ...) on this master: that expiry is the client's. The
/// bindings on the key end; each holder's own lease gets its ttl from now
/// (for locks the lease is the key's expiry, which stays as the client
/// set it), at the next `KEEP` timer.
pub fn expiry_set(ctx: &Context, name: &[u8]) {
    if !any_bound() {
        return;
    }
    let key: KeyAt = (super::blocking::selected_db(ctx), name.into());
    // One borrow for the look and the unbinding (a busy state, which no
    // path leaves, would only skip it).
    let ended: Vec<_> = BOUND.with(|b| {
        let Ok(mut b) = b.try_borrow_mut() else {
            return Vec::new();
        };
        b.on(&key)
            .into_iter()
            .filter_map(|l| b.unbind(&l).map(|x| (l, x.ttl_ms, x.payload)))
            .collect()
    });
    if ended.is_empty() {
        return;
    }
    unbind::ended_by(ended, true);
}

/// A connection closed (Redis' `freeClient`): what it bound runs out one
/// ttl from now unless bound again.
pub fn client_closed(client: u64) {
    unbind::closed(client);
}

/// Bound leases (for `INFO`); -1 while busy.
pub fn bound() -> i64 {
    BOUND.with(|b| b.try_borrow().map_or(-1, |b| b.len() as i64))
}

/// This server became a replica: it renews nothing any more.
pub fn clear() {
    unbind::clear();
    lost::clear();
}

/// This server was promoted (or `SWAPDB` moved keys away from their
/// bindings): what it holds far away with no binding runs out one ttl from
/// now unless bound again.
pub fn thaw_all() {
    thaw::start();
}

thread_local! {
    /// When an effect last reached this server while it is a master (an
    /// atomic slot migration's stream): only then may a native
    /// `PEXPIREAT` bring a far deadline with it.
    static STREAM_AT: Cell<i64> = const { Cell::new(i64::MIN) };
}

/// How long after the last effect from another master `PEXPIREAT`s are
/// looked at (a migration's snapshot sends a lock's expiry right after it).
const STREAM_WINDOW_MS: i64 = 60_000;

/// An effect reached `name` with `deadline_ms` on this server. On a master
/// that is not loading it came from another master (an atomic slot
/// migration), and no binding here keeps a far deadline it brought, so
/// that lease is thawed (once the slot is this node's to touch).
pub fn arrived(ctx: &Context, flags: ContextFlags, name: &[u8], deadline_ms: i64) {
    if flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING) {
        STREAM_AT.set(now_ms());
        if kept_ttl(deadline_ms).is_some() {
            thaw::note(super::blocking::selected_db(ctx), name);
        }
    }
}

/// Did another master's stream reach this server lately? (Then an
/// `expire` event may carry a far deadline: see `arrived`.)
pub fn stream_recent() -> bool {
    let at = STREAM_AT.get();
    at != i64::MIN && now_ms().saturating_sub(at) < STREAM_WINDOW_MS
}

/// Slots moved (atomic slot migration).
pub fn slots_changed() {
    thaw::slots_changed();
}

/// Slots start to move away (`glue::leaving`): the bindings on their keys
/// end now, each lease getting its ttl (the new owner binds nothing), and
/// a hold whose losses go to a mailbox is told `-LOST migrating` at once,
/// as is one already unbound there: after the move a post could reach no
/// one. Nothing of them is told later.
pub fn slots_leaving(ctx: &Context) {
    settle();
    let leaving = |k: &KeyAt| super::leaving::has(&k.1);
    let ended: Vec<_> = BOUND.with(|b| {
        let Ok(mut b) = b.try_borrow_mut() else {
            return Vec::new();
        };
        let keys = b.keys_where(leaving);
        keys.iter()
            .flat_map(|k| b.take_key(k))
            .map(|(lease, x)| (lease, x.ttl_ms, x.payload))
            .collect()
    });
    let mut mails: Vec<_> = lost::keys_gone(leaving);
    let ended = ended
        .into_iter()
        .map(|(lease, ttl, mut how)| {
            mails.extend(how.mail.take());
            (lease, ttl, how)
        })
        .collect();
    unbind::ended_by(ended, false);
    // Posted now, while the slot is still this node's: the posts go with it.
    let lost = crate::glue::blocking::Reply::Error("LOST migrating".to_owned());
    for m in mails {
        crate::glue::mailbox::post(ctx, &m, &lost);
    }
}

/// A key reached `name` from elsewhere on this master (`RENAME`, `MOVE`,
/// `COPY`, `RESTORE`): a lease it holds far away has no binding here.
pub fn moved_in(ctx: &Context, name: &[u8]) {
    if thaw::any_values() && super::blocking::may_write(ctx) {
        thaw::note(super::blocking::selected_db(ctx), name);
    }
}
