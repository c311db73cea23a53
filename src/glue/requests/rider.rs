//! The running request's id while its body runs (`run`, a queued
//! request's grant in `riding`, an effect from the master): what a wait it
//! queues carries, and, with a rule, what its effect carries
//! (`piggy::ride`).
//!
//! The seat holds a pointer to the tag, not the tag: the tag stays in the
//! frame of whoever boarded it, whose guard borrows it and gives the seat
//! back before that frame ends. Every request with `ID` boards, and moving
//! a tag (its names and its 40-byte id) in and out of the seat was a copy
//! each way.

use std::marker::PhantomData;
use std::ptr::null_mut;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, AtomicU8, Ordering::Relaxed};

use redis_module::Context;

use super::rule::{Fields, Rule};
use super::Tag;
use crate::core::ids::Answer;

#[derive(Clone, Copy)]
pub struct Rider {
    /// Alive while the rider is seated (see the module's doc).
    tag: *const Tag,
    pub rule: Option<Rule>,
    /// The request replicates as itself (`piggy::verbatim`).
    pub verbatim: bool,
    pub at_ms: i64,
    /// The fields of the effect that carried the id, once one did.
    pub sent: Option<Fields>,
}

impl Rider {
    pub fn tag(&self) -> &Tag {
        // SAFETY: the guard that seated this rider borrows the tag and
        // unseats the rider before the borrow ends.
        unsafe { &*self.tag }
    }
}

// The seat, in plain atomic statics rather than a thread-local (a
// thread-local read is a call in a cdylib, and a request with `ID` reads
// the seat a few times): only Redis' main thread runs commands, effects
// and timers, so Relaxed is all they need. A null tag: nobody seated.
static TAG: AtomicPtr<Tag> = AtomicPtr::new(null_mut());
static AT_MS: AtomicI64 = AtomicI64::new(0);
/// The rule (bits 0-2, 0 for none), verbatim (bit 3), sent (bit 4).
static FLAGS: AtomicU8 = AtomicU8::new(0);
static SENT: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

const VERBATIM: u8 = 1 << 3;
const SENT_BIT: u8 = 1 << 4;

fn load() -> Option<Rider> {
    let tag = TAG.load(Relaxed);
    if tag.is_null() {
        return None;
    }
    let flags = FLAGS.load(Relaxed);
    let rule = Rule::ALL
        .get(usize::from(flags & 7).wrapping_sub(1))
        .copied();
    let sent = (flags & SENT_BIT != 0).then(|| {
        let [fence, count, reads, writes] = SENT.each_ref().map(|a| a.load(Relaxed));
        Fields {
            fence,
            count,
            reads,
            writes,
        }
    });
    Some(Rider {
        tag,
        rule,
        verbatim: flags & VERBATIM != 0,
        at_ms: AT_MS.load(Relaxed),
        sent,
    })
}

/// Seats `r` (or nobody); answers who sat there.
fn seat(r: Option<Rider>) -> Option<Rider> {
    let before = load();
    let Some(r) = r else {
        TAG.store(null_mut(), Relaxed);
        return before;
    };
    let rule = r.rule.and_then(|x| Rule::ALL.iter().position(|&y| y == x));
    let mut flags = rule.map_or(0, |i| i as u8 + 1);
    if r.verbatim {
        flags |= VERBATIM;
    }
    if let Some(f) = r.sent {
        flags |= SENT_BIT;
        for (a, v) in SENT.iter().zip([f.fence, f.count, f.reads, f.writes]) {
            a.store(v, Relaxed);
        }
    }
    TAG.store(r.tag as *mut Tag, Relaxed);
    AT_MS.store(r.at_ms, Relaxed);
    FLAGS.store(flags, Relaxed);
    before
}

/// Whether a rider is seated: every lease written asks (`piggy::ride`),
/// and without `ID` none is.
pub fn boarded() -> bool {
    !TAG.load(Relaxed).is_null()
}

/// Gives the seat back to whatever rode before, however the body ended.
pub struct Boarded<'t>(Option<Rider>, PhantomData<&'t Tag>);

impl Drop for Boarded<'_> {
    fn drop(&mut self) {
        // Nothing to give back once the rider alighted and none rode
        // before (every request but one inside another's grant).
        if self.0.is_none() && !boarded() {
            return;
        }
        seat(self.0.take());
    }
}

/// Before a request's body: its id is the running one, and may ride on
/// the effect the body sends when its reply has a `rule`.
pub fn board(tag: &Tag, rule: Option<Rule>, at_ms: i64) -> Boarded<'_> {
    board_as(tag, rule, false, at_ms)
}

/// `board`, for a request that replicates as itself when its effect is
/// its own (`verbatim`).
pub fn board_as(tag: &Tag, rule: Option<Rule>, verbatim: bool, at_ms: i64) -> Boarded<'_> {
    let rider = Rider {
        tag,
        rule,
        verbatim,
        at_ms,
        sent: None,
    };
    Boarded(seat(Some(rider)), PhantomData)
}

/// After the body (before the guard goes): what the effect that carried
/// the id said the reply is, if one did.
pub fn alight() -> Option<Answer> {
    let r = seat(None)?;
    Some(r.sent?.answer(r.rule?))
}

/// `f` on the seated rider, if one is; what `f` changes stays.
pub fn with<R>(f: impl FnOnce(&mut Rider) -> R) -> Option<R> {
    let mut r = load()?;
    let out = f(&mut r);
    seat(Some(r));
    Some(out)
}

/// The running request's id, for a wait it queues.
pub fn running() -> Option<Rc<Tag>> {
    load().map(|r| Rc::new(r.tag().clone()))
}

/// Whether a request-id waits for its effect now (cheap: the free path
/// reads its holder only then).
pub fn aboard() -> bool {
    let flags = FLAGS.load(Relaxed);
    boarded() && flags & 7 != 0 && flags & SENT_BIT == 0
}

/// Whether the running request is one the master sent as itself (or the
/// AOF holds as itself), running again here: it then must read no clock,
/// as an effect would not. Cheap off that path: a flags call only with a
/// verbatim request aboard.
pub fn runs_again(ctx: &Context) -> bool {
    let verbatim = boarded() && FLAGS.load(Relaxed) & VERBATIM != 0;
    verbatim
        && ctx.get_flags().intersects(
            redis_module::ContextFlags::REPLICATED | redis_module::ContextFlags::LOADING,
        )
}

/// Runs `f` with no request aboard: the effects it sends are not the
/// running request's. A holder removed because its lease ran out comes
/// before the request decides anything, and may be the request's own
/// holder (whose request is then refused): its removal must go as that,
/// neither carrying the request's id nor standing in for the request.
pub fn aside<R>(f: impl FnOnce() -> R) -> R {
    if !boarded() {
        return f();
    }
    let _back: Boarded<'_> = Boarded(seat(None), PhantomData);
    f()
}
