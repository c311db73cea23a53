//! What the kinds with a lease per holder inside one key (semaphores,
//! read-write locks) share: holders whose lease ran out are removed, and
//! the removal replicated, by the master before any change, so replicas
//! never expire holders by their own clock; the key expires with its
//! latest holder and goes when the last one leaves.

use redis_module::{Context, RedisString};

use crate::core::error::Error;
use crate::core::since::Since;
use crate::glue::commit::{commit, Note, Write};
use crate::glue::info::bump;
use crate::glue::keep;
use crate::glue::key::Key;
use crate::glue::types::Value;

/// A value whose holders each have their own lease.
pub trait Leased: Value {
    /// One holder's new state, as decided and as replicated.
    type Effect<'h>;

    fn expire(&self, now_ms: i64) -> Vec<Self::Effect<'static>>;
    /// Applies an effect; a hold it ended is returned as (its start, its
    /// lease end), for the hold percentiles.
    fn apply(&mut self, e: &Self::Effect<'_>) -> Option<(Since, i64)>;
    fn is_empty(&self) -> bool;
    fn latest_deadline(&self) -> Option<i64>;
    /// Sends the effect to replicas and the AOF.
    fn replicate(ctx: &Context, name: &RedisString, e: &Self::Effect<'_>);
    /// The holder an effect gives a lease to, its fence (if the kind has
    /// them) and its deadline; None for an effect that removes the holder.
    fn lease<'e>(e: &'e mut Self::Effect<'_>) -> Option<(&'e [u8], Option<u64>, &'e mut i64)>;
}

/// The effects one command had on a key, and the key's state after them.
struct Changed<'h, V: Leased> {
    /// A value made by this command (the key was empty).
    fresh: Option<V>,
    /// Holders whose lease had ended, removed first.
    expired: Vec<V::Effect<'static>>,
    /// What the command itself decided.
    decided: Option<V::Effect<'h>>,
    empty: bool,
    latest: Option<i64>,
}

impl<V: Leased> Write for Changed<'_, V> {
    fn write(self, ctx: &Context, name: &RedisString, key: &mut Key) {
        if !self.expired.is_empty() {
            crate::glue::requests::rider::aside(|| {
                for e in &self.expired {
                    V::replicate(ctx, name, e);
                }
            });
        }
        if let Some(e) = &self.decided {
            V::replicate(ctx, name, e);
        }
        match (self.fresh, self.empty, self.latest) {
            (Some(v), false, Some(at)) => {
                key.put(v);
                key.set_expire_at(at);
            }
            (None, true, _) => key.delete(),
            (None, false, Some(at)) => key.set_expire_at(at),
            _ => {}
        }
    }
}

/// Decides on the value at `name` (`fresh()` when the key is empty) after
/// removing holders whose lease ended by `now` (None: a replicated effect,
/// no clock read), and commits what changed. `note` applies when `decide`
/// returned an effect.
pub fn change<'h, V: Leased, R>(
    ctx: &Context,
    name: &RedisString,
    now: Option<i64>,
    fresh: impl FnOnce() -> V,
    note: Note,
    decide: impl FnOnce(&V) -> Result<(R, Option<V::Effect<'h>>), Error>,
) -> Result<R, Error> {
    let mut key = Key::write(ctx, name);
    let mut made = None;
    let (result, mut changed) = {
        let value = match key.value::<V>()? {
            Some(v) => v,
            None => made.insert(fresh()),
        };
        let expired = now.map(|t| value.expire(t)).unwrap_or_default();
        let hold = V::INFO.holds;
        for e in &expired {
            if let Some((since, end)) = value.apply(e) {
                hold.held(since, end);
            }
            bump(&V::INFO.counters.expired_holders);
        }
        let (result, mut decided) = match decide(value) {
            Ok((r, e)) => (Ok(r), e),
            Err(e) => (Err(e), None),
        };
        if let Some((holder, fence, deadline)) = decided.as_mut().and_then(V::lease) {
            // A bound lease stays far away.
            *deadline = keep::write_at(ctx, name, holder, fence, *deadline);
        }
        if let Some(e) = &decided {
            if let (Some((since, _)), Some(now)) = (value.apply(e), now) {
                hold.held(since, now);
            }
        }
        let changed = Changed::<V> {
            fresh: None,
            expired,
            decided,
            empty: value.is_empty(),
            latest: value.latest_deadline(),
        };
        (result, changed)
    };
    if changed.decided.is_some() {
        changed.fresh = made;
        commit(ctx, name, key, changed, note);
    } else if !changed.expired.is_empty() {
        commit(ctx, name, key, changed, Note::default());
    }
    result
}
