//! The hand-off: when a key may have become free (a release, a lease that
//! ran out, a DEL, a flush), the head of its queue is granted at the end of
//! that same command or timer pass, before any other command runs, so no
//! newcomer can barge in. Writes only mark keys ready; serving happens in
//! one place (`serve_ready`), so a grant's own write never re-enters the
//! engine. And while a key has waiters, the timer is kept on the moment
//! its lease may free it.

use crate::core::hash::Set;
use std::cell::RefCell;
use std::sync::atomic::AtomicU64;

use redis_module::Context;

use super::super::blocking::{self, Reply};
use super::super::config;
use super::super::info;
use super::super::keep;
use super::super::key::Key;
use super::super::mailbox;
use super::super::requests;
use super::super::server::now_ms;
use super::clients;
use super::recover::Undo;
use super::state::{self, KeyId};
use super::timer;
use crate::core::queue::WaiterId;
use crate::core::waiters::Entry;

thread_local! {
    /// Keys with waiters that a write changed since they were last served
    /// (Redis core's `signalKeyAsReady`): served once, at the end of the
    /// command or timer pass that wrote them (`serve_ready`).
    static READY: RefCell<Vec<KeyId>> = const { RefCell::new(Vec::new()) };

    /// The key whose queue is being served: its own grants' writes need not
    /// mark it ready again (it is served to the end before anything else).
    static SERVING: RefCell<Option<KeyId>> = const { RefCell::new(None) };
}

/// Marks `key` as being served until dropped (also when a bug unwinds:
/// a mark left behind would keep the key from ever being ready again).
/// Serving never nests: nothing serves while a key is served.
struct Serving;

impl Serving {
    fn of(key: &KeyId) -> Serving {
        SERVING.with(|s| *s.borrow_mut() = Some(key.clone()));
        Serving
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.with(|s| *s.borrow_mut() = None);
    }
}

/// Whether `name` (in the selected database) is the key being served.
pub fn serving(ctx: &Context, name: &[u8]) -> bool {
    SERVING.with(|s| {
        s.borrow()
            .as_ref()
            .is_some_and(|k| *k.name == *name && k.db == blocking::selected_db(ctx))
    })
}

/// A write changed `key`, which has waiters: serve it at the end of this
/// command or timer pass.
pub fn note_ready(key: KeyId) {
    READY.with(|r| r.borrow_mut().push(key));
}

fn take_ready() -> Vec<KeyId> {
    READY.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Serves every ready key: its queue's heads are granted while they can
/// be, then the timer is set on when it may next free itself. A grant's own
/// commit makes keys ready again (the granted key, for a semaphore's next
/// waiter; a multi-key waiter's other keys), so this runs until nothing is
/// ready; each grant takes a waiter out, so it ends. A waiter refused once
/// in a pass is not asked again in it: grants only take keys, so it could
/// not be granted later in the same pass either.
pub fn serve_ready(ctx: &Context) {
    if READY.with(|r| r.borrow().is_empty()) {
        return;
    }
    let mut tried = Set::default();
    loop {
        let mut keys = take_ready();
        if keys.is_empty() {
            break;
        }
        // One key (a release's, the usual case) needs no set to be unique.
        if keys.len() > 1 {
            let mut seen = Set::with_capacity_and_hasher(keys.len(), Default::default());
            keys.retain(|k| seen.insert(k.clone()));
        }
        for key in &keys {
            serve(ctx, key, &mut tried);
        }
    }
}

/// Wakes, with nil, every waiter whose BLOCK timeout has come.
pub fn time_out(ctx: &Context, now: i64) {
    let due = state::with(|s| s.waiters.timed_out(now));
    dismiss(Some(ctx), due, &Reply::Nil, &info::TIMEOUTS);
}

/// Answers every waiter on `key` with `reply`, ungranted: its slot is no
/// longer this node's to grant.
pub fn turn_away(ctx: &Context, key: &KeyId, reply: &Reply) {
    let mut ids = Vec::new();
    state::with(|s| {
        while let Some(id) = s.waiters.head(key) {
            ids.extend(s.take(id).map(|taken| (id, taken)));
        }
    });
    wake_all(Some(ctx), ids, reply, &info::TURNED_AWAY);
}

/// Answers every waiter with `reply`, ungranted (this node stopped being a
/// master: like Redis' own blocked clients, they are told at once; a
/// replica posts to no mailbox).
pub fn turn_away_all(reply: &Reply) {
    let ids = state::with(|s| s.waiters.ids());
    dismiss(None, ids, reply, &info::TURNED_AWAY);
}

/// Takes waiters out of the queues and answers them, ungranted.
pub fn dismiss(ctx: Option<&Context>, ids: Vec<WaiterId>, reply: &Reply, counter: &AtomicU64) {
    let taken = state::with(|s| {
        ids.into_iter()
            .filter_map(|id| Some((id, s.take(id)?)))
            .collect()
    });
    wake_all(ctx, taken, reply, counter);
}

type Taken = (WaiterId, (Vec<KeyId>, Entry<state::Waiter>));

fn wake_all(ctx: Option<&Context>, taken: Vec<Taken>, reply: &Reply, counter: &AtomicU64) {
    state::with(|s| {
        for (id, (_, e)) in &taken {
            s.graph.remove_blocked(&e.payload.holder, *id);
        }
    });
    for (_, (keys, e)) in taken {
        info::bump(counter);
        tell(ctx, e.payload.to, reply.clone(), None);
        timer::note(keys.into_iter().map(|k| k.name));
    }
}

/// Tells a waiter taken out of its queues its outcome: its blocked client
/// is woken, its mailbox posted to (where `ctx` may write; a replica
/// posts nothing).
pub fn tell(ctx: Option<&Context>, to: state::Party, reply: Reply, undo: Option<Undo>) {
    match to {
        state::Party::Blocked(h) => clients::wake(h, reply, undo),
        state::Party::Mailbox { mail, .. } => {
            if let Some(ctx) = ctx {
                mailbox::post(ctx, &mail, &reply);
            }
        }
    }
}

/// Grants the head of `key`'s queue while it can be granted (a semaphore
/// may serve several waiters in a row), then re-times the key.
fn serve(ctx: &Context, key: &KeyId, tried: &mut Set<WaiterId>) {
    if !state::with(|s| s.waiters.has_waiters(key)) {
        return;
    }
    if !blocking::is_master(ctx) {
        return;
    }
    if !blocking::may_write(ctx) {
        // Paused or loading: look again when writes are allowed.
        timer::note([key.name.clone()]);
        return;
    }
    // Its own grants do not mark it ready again: it is served to the end
    // here, so another pass would only refuse its head again.
    let known = {
        let _serving = Serving::of(key);
        grant_heads(ctx, key, tried)
    };
    match known {
        Some(at) if state::with(|s| s.waiters.has_waiters(key)) => refresh_at(key, Some(at)),
        _ => refresh(ctx, key),
    }
}

/// Returns when the key may next free itself when its last grant said so
/// (`Granted::frees_at`; nothing has written the key since).
fn grant_heads(ctx: &Context, key: &KeyId, tried: &mut Set<WaiterId>) -> Option<i64> {
    // The holder a grant left the key to alone (`Granted::sole`): only its
    // own requests may still be granted in this pass.
    let mut alone: Option<Vec<u8>> = None;
    let mut known = None;
    // A head refused earlier in this pass is not asked again (and not even
    // checked for being first everywhere, which costs a lookup per key it
    // waits on).
    while let Some(id) = state::with(|s| s.waiters.head(key))
        .filter(|id| !tried.contains(id))
        .filter(|id| state::with(|s| s.waiters.ready(*id)))
    {
        if state::with(|s| s.waiters.get(id).and_then(|(_, e)| e.timeout_at))
            .is_some_and(|t| t <= now_ms())
        {
            // Its time ran out first: nil, and on to the next in line.
            time_out(ctx, now_ms());
            continue;
        }
        if let Some(h) = &alone {
            if state::with(|s| {
                s.waiters
                    .get(id)
                    .is_some_and(|(_, e)| e.payload.holder != *h)
            }) {
                // What its kind would answer, without opening the key (and
                // not remembered in `tried`: only another grant to that one
                // holder could make the key ready again in this pass).
                break;
            }
        }
        // The waiter stays queued while its kind decides (no borrow of the
        // state across that call); it is taken out only once granted.
        let Some((keys, holder, db, want, client, mail)) = state::with(|s| {
            let (keys, e) = s.waiters.get(id)?;
            let w = &e.payload;
            let mail = match &w.to {
                state::Party::Mailbox { mail, .. } => Some(mail.clone()),
                state::Party::Blocked(_) => None,
            };
            Some((
                keys.clone(),
                w.holder.clone(),
                w.db,
                w.want.clone(),
                w.to.client_id(),
                mail,
            ))
        }) else {
            break;
        };
        let request = state::with(|s| {
            s.waiters
                .get(id)
                .and_then(|(_, e)| e.payload.request.clone())
        });
        let at_ms = now_ms();
        let (outcome, rode) = blocking::in_db(ctx, db, || {
            let one;
            let many: Vec<_>;
            let names = match keys.as_slice() {
                [k] => {
                    one = k.name(ctx);
                    std::slice::from_ref(&one)
                }
                _ => {
                    many = keys.iter().map(|k| k.name(ctx)).collect();
                    &many[..]
                }
            };
            // A `KEEP` grant through a mailbox reports its loss there; its
            // request-id rides on its effect when it can.
            requests::riding(request.as_ref(), want.rule(), at_ms, || {
                keep::losses_to(mail, || want.try_grant(ctx, names, &holder, client, at_ms))
            })
        });
        known = None;
        let (reply, take_back, sole) = match outcome {
            Ok(Some(g)) => {
                known = g.frees_at;
                (g.reply, Some(g.take_back), g.sole)
            }
            Ok(None) => {
                tried.insert(id);
                break;
            }
            Err(crate::core::error::Error::TryAgain) => {
                // The restart grace is running: serve when it ends.
                if let Some(end) = config::grace_ends(want.ttl_ms()) {
                    timer::arm(end);
                }
                break;
            }
            Err(e) => (Reply::Error(e.message()), None, false),
        };
        let Some((keys, e)) = state::with(|s| {
            let taken = s.take(id)?;
            s.graph.remove_blocked(&taken.1.payload.holder, id);
            Some(taken)
        }) else {
            break;
        };
        info::bump(&info::HANDOFFS);
        let waited = e.payload.queued.elapsed().as_micros();
        e.payload
            .want
            .kind()
            .waits
            .record(waited.min(i64::MAX as u128) as i64);
        if let Some(tag) = &request {
            blocking::in_db(ctx, db, || {
                requests::granted(ctx, tag.clone(), &reply, (at_ms, rode.clone()))
            });
        }
        // A mailbox post cannot get lost on its way as a reply can: its
        // grant needs no undo.
        let undo = match &e.payload.to {
            state::Party::Blocked(_) => take_back.map(|take_back| Undo {
                db,
                keys: keys.into_iter().map(|k| k.name.to_vec()).collect(),
                holder: holder.clone(),
                take_back,
                request,
            }),
            state::Party::Mailbox { .. } => None,
        };
        tell(Some(ctx), e.payload.to, reply, undo);
        if sole {
            alone = Some(holder);
        }
    }
    known
}

/// Keeps the timer on when `key` may next free itself (its lease end, or
/// a semaphore's earliest holder lease end), while it has waiters.
pub fn refresh(ctx: &Context, key: &KeyId) {
    if !state::with(|s| s.waiters.has_waiters(key)) {
        state::with(|s| s.waiters.watch(key, None));
        return;
    }
    let at = blocking::in_db(ctx, key.db, || {
        let name = key.name(ctx);
        let k = Key::read(ctx, &name);
        let expire = k.expire_at();
        k.stored().ok().flatten().and_then(|v| v.frees_at(expire))
    });
    refresh_at(key, at);
}

/// `refresh` when the key's next free time `at` is already known.
pub fn refresh_at(key: &KeyId, at: Option<i64>) {
    // Redis counts a key as expired only once the clock is past its
    // deadline: fire 1 ms after it. While the restart grace holds the head
    // of the queue back, try again when it ends.
    let now = now_ms();
    let head_ttl = state::with(|s| {
        let id = s.waiters.head(key)?;
        s.waiters.get(id).map(|(_, e)| e.payload.want.ttl_ms())
    });
    let grace = head_ttl
        .and_then(config::grace_ends)
        .filter(|end| *end > now);
    let at = at.map(|t| t + 1).into_iter().chain(grace).min();
    state::with(|s| s.waiters.watch(key, at));
    if let Some(t) = at {
        timer::arm(t);
    }
}
