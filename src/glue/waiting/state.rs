//! The engine's state: who waits (`core::waiters`) and the wait-for graph,
//! on the main thread only.
//!
//! The borrow rule: no borrow of the state is held across a call into
//! Redis. A Redis call may run padlock callbacks (a type's unlink callback,
//! a blocked client's free callback), and those only note work for the
//! timer (`timer::note`, `recover::lost`), never borrowing the state
//! mutably. Every `with` body is plain Rust; code that must read keys reads
//! them first, or between short borrows (see `deadlock::check`).

use crate::core::hash::{Map, Set};
use std::cell::RefCell;
use std::rc::Rc;

use redis_module::{Context, RedisString, RedisValue};

use super::super::blocking::{self, Handle, Reply};
use crate::core::error::Error;
use crate::core::ids::Address;
use crate::core::queue::WaiterId;
use crate::core::waiters::{Entry, Waiters};
use crate::core::waitgraph::{Held, Need, WaitGraph};
use crate::glue::mailbox::Mail;
use crate::glue::requests::Tag;
use crate::glue::types::Stored;

/// A key in a database. Its name is shared: a waiter's key is held by its
/// queue, its wait-for edges, the lease watch and the timer's lists, and a
/// copy of each would be an allocation per waiter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId {
    pub db: i32,
    pub name: Rc<[u8]>,
}

impl KeyId {
    pub fn of(ctx: &Context, name: &RedisString) -> KeyId {
        KeyId {
            db: blocking::selected_db(ctx),
            name: name.as_slice().into(),
        }
    }

    pub fn name(&self, ctx: &Context) -> RedisString {
        RedisString::create_from_slice(ctx.ctx, &self.name)
    }
}

/// A waiter's request as its kind grants it (`glue::kinds` implements
/// this): the engine only queues, times and hands off; what a grant means
/// for a key is the kind's business. The contract (docs/design.md, "What a
/// `Want` may do"):
pub trait Want {
    /// Grants the request now if it can be. Called while serving, with the
    /// waiter still queued and no borrow of the engine's state held. It may
    /// open and write its keys, only through its kind and the commit step
    /// (replicated, counted, keys marked ready), and may bind a `KEEP`
    /// lease; it must not call back into the engine (`wait`,
    /// `serve_ready`), block, or read the engine's state. `Ok(None)`: not
    /// yet (not asked again in this serving pass); `Err(TryAgain)`: the
    /// restart grace (asked again when it ends); another error wakes the
    /// waiter with it.
    /// `client`: the connection the request belongs to now (a `KEEP`
    /// grant binds there; a resend may have moved it).
    fn try_grant(
        &self,
        ctx: &Context,
        names: &[RedisString],
        holder: &[u8],
        client: u64,
        now_ms: i64,
    ) -> Result<Option<Granted>, Error>;

    /// The lease asked for (the `auto` restart grace is measured by it).
    /// This and the two below are plain answers, asked with the state
    /// borrowed: they must not call into Redis.
    fn ttl_ms(&self) -> i64;

    /// Which field of its grant's effect the reply is, when its request-id
    /// may ride on that effect (`requests::piggy`); None: sent apart.
    fn rule(&self) -> Option<crate::glue::requests::piggy::Rule> {
        None
    }

    /// Whether it shares the key with other sharing requests (readers).
    fn need(&self) -> Need {
        Need::Exclusive
    }

    /// Whether it waits ahead of everyone queued (a holder upgrading its
    /// own hold: those queued would wait for it anyway).
    fn jumps_queue(&self) -> bool {
        false
    }

    /// What `*.INFO`'s `queue` shows of the request beside its holder and
    /// wait (a semaphore's permits, a read-write lock's mode).
    fn detail(&self) -> Option<RedisValue> {
        None
    }

    /// Its kind: `LOCK.TOP` names it, its wait percentiles count it.
    fn kind(&self) -> &'static crate::glue::types::KindInfo;
}

/// What a refused request saw of its one key while the key was open: all
/// its holders, those this request waits for, and when the key may free
/// itself. Waiting on that key then reads it no more.
pub struct Seen {
    pub held: Held,
    /// Those this request waits for, when not all of `held`.
    pub held_for: Option<Held>,
    pub frees_at: Option<i64>,
}

impl Seen {
    pub fn of(
        v: &dyn Stored,
        key_expire: Option<i64>,
        waiter: &[u8],
        need: Need,
        now: i64,
    ) -> Seen {
        Seen {
            held: v.held(now),
            held_for: (!v.held_alike()).then(|| v.held_for(waiter, need, now)),
            frees_at: v.frees_at(key_expire),
        }
    }
}

/// When an acquire is tried, and whether a refusal will wait (then the
/// kind hands over what it saw of the key: `Seen`).
#[derive(Clone, Copy)]
pub struct Try {
    pub now: i64,
    /// `BLOCK` was given: a refusal waits, unless the command runs inside
    /// MULTI, Lua or a module call (`will_wait`).
    pub block: bool,
}

impl Try {
    /// A try by the engine itself (a queued waiter, which is not queued
    /// again when refused).
    pub fn serving(now: i64) -> Try {
        Try { now, block: false }
    }

    /// Whether a refusal will wait. Asked only once refused: the context's
    /// flags cost a few hundred instructions, and most tries are granted.
    pub fn will_wait(&self, ctx: &Context) -> bool {
        self.block && blocking::can_block(ctx)
    }
}

/// An acquire tried now: granted, or refused (with what it saw of its key,
/// when it had it open).
pub enum Attempt<T> {
    Got(T),
    Refused(Option<Seen>),
}

impl<T> Attempt<T> {
    pub fn got(self) -> Option<T> {
        match self {
            Attempt::Got(t) => Some(t),
            Attempt::Refused(_) => None,
        }
    }
}

impl<T> From<Option<T>> for Attempt<T> {
    fn from(o: Option<T>) -> Attempt<T> {
        o.map_or(Attempt::Refused(None), Attempt::Got)
    }
}

/// A grant: the waiter's reply, and how to take it back should the reply
/// never reach the client.
pub struct Granted {
    pub reply: Reply,
    pub take_back: Box<dyn TakeBack>,
    /// The grant leaves its key(s) to its holder alone (a lock, a write
    /// hold): no other holder's request can be granted them until a write
    /// frees them, so serving stops there without asking the kind again.
    pub sole: bool,
    /// When the key may next free itself, when the kind knows it without
    /// reading the key again (a lock's new lease end): the timer is set on
    /// it without opening the key. None: read it back.
    pub frees_at: Option<i64>,
}

/// Undoes a grant whose reply never reached its client, on a later timer;
/// it may write keys as `Want::try_grant` may, with the same limits.
pub trait TakeBack {
    fn take_back(&self, ctx: &Context, names: &[RedisString], holder: &[u8]);
}

/// Who hears a waiter's outcome: its blocked client, or its mailbox (a
/// `MAILBOX` request, which blocks nothing but still belongs to the
/// connection that queued it: `client`).
pub enum Party {
    Blocked(Handle),
    Mailbox { client: u64, mail: Mail },
}

impl Party {
    /// The connection the request belongs to (a `KEEP` grant binds there).
    pub fn client_id(&self) -> u64 {
        match self {
            Party::Blocked(h) => h.client_id(),
            Party::Mailbox { client, .. } => *client,
        }
    }

    fn mailbox_client(&self) -> Option<u64> {
        match self {
            Party::Blocked(_) => None,
            Party::Mailbox { client, .. } => Some(*client),
        }
    }
}

/// `Entry::handle` of mailbox waiters: apart from every blocked client's
/// handle (a pointer, never this high).
const MAILBOX_HANDLES: usize = 1 << (usize::BITS - 1);

pub struct Waiter {
    pub to: Party,
    pub holder: Vec<u8>,
    pub want: Rc<dyn Want>,
    pub db: i32,
    /// When it started waiting (unix ms).
    pub since: i64,
    /// The same on a monotonic clock, for the wait percentiles.
    pub queued: std::time::Instant,
    /// Its `ID request-id`, if it came with one.
    pub request: Option<Rc<Tag>>,
}

/// A queued request's id where it applies (without its hash).
type RequestKey = (Address, crate::core::ids::Id);

#[derive(Default)]
pub struct State {
    pub waiters: Waiters<KeyId, Waiter>,
    pub graph: WaitGraph<KeyId>,
    /// Waiters that came with an id: a resend takes their place.
    by_request: Map<RequestKey, WaiterId>,
    /// The databases anyone ever waited in: where a key noted by name
    /// alone (an unlink callback knows no database) may have waiters.
    pub dbs: std::collections::BTreeSet<i32>,
    /// Mailbox waiters by the connection they belong to (dropped when it
    /// closes), and the next handle one gets.
    by_client: Map<u64, Set<WaiterId>>,
    next_mailbox: usize,
}

impl State {
    /// Queues a waiter (at the front when `first`), indexing its id.
    /// A handle for a mailbox waiter, unlike any other in the queues.
    pub fn mailbox_handle(&mut self) -> usize {
        self.next_mailbox = self.next_mailbox.wrapping_add(1) & !MAILBOX_HANDLES;
        MAILBOX_HANDLES | self.next_mailbox
    }

    pub fn push(&mut self, keys: Vec<KeyId>, entry: Entry<Waiter>, first: bool) -> WaiterId {
        let request = entry
            .payload
            .request
            .as_ref()
            .map(|t| (t.at.clone(), t.id.clone()));
        let client = entry.payload.to.mailbox_client();
        self.dbs.extend(keys.iter().map(|k| k.db));
        let id = match keys.as_slice() {
            [key] if first => self.waiters.push_front(key.clone(), entry),
            _ => self.waiters.push(keys, entry),
        };
        if let Some(r) = request {
            self.by_request.insert(r, id);
        }
        if let Some(c) = client {
            self.by_client.entry(c).or_default().insert(id);
        }
        id
    }

    fn unindex_client(&mut self, client: Option<u64>, id: WaiterId) {
        let Some(c) = client else { return };
        if let Some(ids) = self.by_client.get_mut(&c) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_client.remove(&c);
            }
        }
    }

    /// A resend takes its request's place (its timeout, and who hears the
    /// outcome, are the resend's); the party it replaces is returned.
    pub fn rehome(
        &mut self,
        id: WaiterId,
        to: Party,
        handle: usize,
        timeout_at: Option<i64>,
    ) -> Result<Party, Party> {
        let new_client = to.mailbox_client();
        let Some(e) = self.waiters.hand_over(id, handle, timeout_at) else {
            return Err(to);
        };
        let old = std::mem::replace(&mut e.payload.to, to);
        self.unindex_client(old.mailbox_client(), id);
        if let Some(c) = new_client {
            self.by_client.entry(c).or_default().insert(id);
        }
        Ok(old)
    }

    /// How many wait through a mailbox (for `INFO`).
    pub fn mailbox_waiters(&self) -> usize {
        self.by_client.values().map(|ids| ids.len()).sum()
    }

    /// The mailbox waiters of a connection that closed.
    pub fn of_client(&self, client: u64) -> Vec<WaiterId> {
        self.by_client
            .get(&client)
            .map_or_else(Vec::new, |ids| ids.iter().copied().collect())
    }

    /// The waiter queued with this request-id on its (first) key, whatever
    /// its arguments (`LOCK.CANCEL`).
    pub fn by_id(&self, at: &Address, id: &[u8]) -> Option<WaiterId> {
        let found = *self.by_request.get(&(at.clone(), id.into()))?;
        self.waiters.get(found).map(|_| found)
    }

    /// Takes a waiter out of the queues and the id index.
    pub fn take(&mut self, id: WaiterId) -> Option<(Vec<KeyId>, Entry<Waiter>)> {
        let taken = self.waiters.take(id)?;
        if let Some(t) = &taken.1.payload.request {
            let k = (t.at.clone(), t.id.clone());
            if self.by_request.get(&k) == Some(&id) {
                self.by_request.remove(&k);
            }
        }
        self.unindex_client(taken.1.payload.to.mailbox_client(), id);
        Some(taken)
    }

    /// The waiter queued with this request, if it still waits.
    pub fn queued(&self, tag: &Tag) -> Option<WaiterId> {
        let id = *self.by_request.get(&(tag.at.clone(), tag.id.clone()))?;
        let (_, e) = self.waiters.get(id)?;
        (e.payload.request.as_deref() == Some(tag)).then_some(id)
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let r = f(&mut s);
        crate::glue::timer::set_watching(!s.waiters.is_empty());
        r
    })
}

/// `with`, unless the state is busy (a callback that came while it is
/// borrowed): then nothing is done.
pub fn try_with<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    STATE.with(|s| {
        let mut s = s.try_borrow_mut().ok()?;
        let r = f(&mut s);
        crate::glue::timer::set_watching(!s.waiters.is_empty());
        Some(r)
    })
}

/// True when no client waits; safe to ask from any callback. While the
/// state is busy the answer is false: callers skip serving waiters on true,
/// so a doubt must never be answered with it.
pub fn nobody_waits() -> bool {
    STATE.with(|s| s.try_borrow().is_ok_and(|s| s.waiters.is_empty()))
}

/// True when no wait edge exists; safe to ask from any callback (false
/// while busy, as above).
pub fn no_edges() -> bool {
    STATE.with(|s| s.try_borrow().is_ok_and(|s| s.graph.is_empty()))
}

/// Reads the state without blocking a re-entrant caller: None while busy.
pub fn peek<R>(f: impl FnOnce(&State) -> R) -> Option<R> {
    STATE.with(|s| s.try_borrow().ok().map(|s| f(&s)))
}
