//! Reentrant locks: every rule of docs/commands.md's "Locks" section that does not
//! involve waiting. Functions take the stored state and return what to
//! write; the glue applies the write to the key and replicates exactly it,
//! so replicas and the AOF never re-decide anything.
//!
//! The lease is the key's own expiry: a lock whose deadline passed is simply
//! absent (Redis expires the key), so these functions see `None` for it.

use super::bounds::one_more;
#[cfg(test)]
use super::bounds::MAX_COUNT;
use super::error::Error;
use super::fence::FenceCounter;
use super::since::Since;

/// The value stored in a lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// A boxed slice, not a Vec: 8 bytes less per lock, and it never grows.
    pub holder: Box<[u8]>,
    pub fence: u64,
    /// At most `MAX_COUNT`; four bytes, beside `since`, keep a lock in the
    /// allocator's 32-byte class.
    pub count: u32,
    /// When this hold began (unknown where loaded or replicated).
    pub since: Since,
}

/// What to write to one lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Store this new lock with this absolute deadline (unix ms).
    Put { lock: Lock, deadline_ms: i64 },
    /// Keep the stored lock; set its count, and its deadline when given.
    Touch {
        count: u64,
        deadline_ms: Option<i64>,
    },
    /// Delete the key: the lock is free. The hold that ends began at
    /// `since`, for the hold percentiles.
    Free { since: Since },
}

/// A successful acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub fence: u64,
    pub count: u64,
    /// True for a new acquisition, false for a reentry.
    pub fresh: bool,
}

fn held_by<'a>(current: Option<&'a Lock>, holder: &[u8]) -> Option<&'a Lock> {
    current.filter(|l| *l.holder == *holder)
}

fn bump(count: u64) -> Result<u64, Error> {
    one_more(count, "reentry count")
}

/// `LOCK.ACQUIRE` without waiting. `Ok(None)`: held by another holder.
pub fn acquire(
    current: Option<&Lock>,
    holder: &[u8],
    ttl_ms: i64,
    now_ms: i64,
    fences: &mut FenceCounter,
) -> Result<Option<(Grant, Effect)>, Error> {
    let deadline_ms = now_ms.saturating_add(ttl_ms);
    match current {
        None => {
            let fence = fences.next(now_ms)?;
            let lock = Lock {
                holder: holder.into(),
                count: 1,
                fence,
                since: Since::at(now_ms),
            };
            let grant = Grant {
                fence,
                count: 1,
                fresh: true,
            };
            Ok(Some((grant, Effect::Put { lock, deadline_ms })))
        }
        Some(l) if *l.holder == *holder => {
            let count = bump(u64::from(l.count))?;
            let grant = Grant {
                fence: l.fence,
                count,
                fresh: false,
            };
            let effect = Effect::Touch {
                count,
                deadline_ms: Some(deadline_ms),
            };
            Ok(Some((grant, effect)))
        }
        Some(_) => Ok(None),
    }
}

/// `LOCK.REENTER`: count + 1 only when already held by this holder.
pub fn reenter(
    key: &[u8],
    current: Option<&Lock>,
    holder: &[u8],
    ttl_ms: i64,
    now_ms: i64,
) -> Result<(u64, Effect), Error> {
    let l = held_by(current, holder).ok_or_else(|| Error::not_held(key, holder))?;
    let count = bump(u64::from(l.count))?;
    let effect = Effect::Touch {
        count,
        deadline_ms: Some(now_ms.saturating_add(ttl_ms)),
    };
    Ok((count, effect))
}

/// `LOCK.RELEASE`: count - 1; the key goes at 0. Returns the remaining count.
pub fn release(key: &[u8], current: Option<&Lock>, holder: &[u8]) -> Result<(u64, Effect), Error> {
    let l = held_by(current, holder).ok_or_else(|| Error::not_held(key, holder))?;
    let count = u64::from(l.count) - 1;
    let effect = if count == 0 {
        Effect::Free { since: l.since }
    } else {
        Effect::Touch {
            count,
            deadline_ms: None,
        }
    };
    Ok((count, effect))
}

/// `LOCK.EXTEND`: a new lease, the count untouched.
pub fn extend(
    key: &[u8],
    current: Option<&Lock>,
    holder: &[u8],
    ttl_ms: i64,
    now_ms: i64,
) -> Result<Effect, Error> {
    let l = held_by(current, holder).ok_or_else(|| Error::not_held(key, holder))?;
    Ok(Effect::Touch {
        count: u64::from(l.count),
        deadline_ms: Some(now_ms.saturating_add(ttl_ms)),
    })
}

/// `LOCK.EXTEND` of a missing lock during the restart grace: the holder
/// that is still working gets it back (count 1, a new fence).
pub fn recreate(
    holder: &[u8],
    ttl_ms: i64,
    now_ms: i64,
    fences: &mut FenceCounter,
) -> Result<Effect, Error> {
    Ok(Effect::Put {
        lock: Lock {
            holder: holder.into(),
            count: 1,
            fence: fences.next(now_ms)?,
            since: Since::at(now_ms),
        },
        deadline_ms: now_ms.saturating_add(ttl_ms),
    })
}

/// `LOCK.MACQUIRE` without waiting: all keys or none. `Ok(None)` when any
/// key is held by another holder; then no fence is consumed either.
pub fn macquire(
    current: &[Option<&Lock>],
    holder: &[u8],
    ttl_ms: i64,
    now_ms: i64,
    fences: &mut FenceCounter,
) -> Result<Option<Vec<(Grant, Effect)>>, Error> {
    if current.iter().flatten().any(|l| *l.holder != *holder) {
        return Ok(None);
    }
    // Check every count before issuing any fence, so an overflow on the
    // last key cannot leave earlier fences consumed for nothing.
    for l in current.iter().flatten() {
        bump(u64::from(l.count))?;
    }
    let mut out = Vec::with_capacity(current.len());
    for c in current {
        match acquire(*c, holder, ttl_ms, now_ms, fences)? {
            Some(step) => out.push(step),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// `LOCK.MRELEASE`: all keys or none; `NOTHELD` names the first key not held.
pub fn mrelease(
    keys: &[&[u8]],
    current: &[Option<&Lock>],
    holder: &[u8],
) -> Result<Vec<(u64, Effect)>, Error> {
    keys.iter()
        .zip(current)
        .map(|(k, c)| release(k, *c, holder))
        .collect()
}

pub mod args;
pub mod stored;

#[cfg(test)]
mod tests;
