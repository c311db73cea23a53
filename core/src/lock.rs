//! Reentrant locks: every rule of the SPEC's "Locks" section that does not
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

/// The value stored in a lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// A boxed slice, not a Vec: 8 bytes less per lock, and it never grows.
    pub holder: Box<[u8]>,
    pub count: u64,
    pub fence: u64,
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
    /// Delete the key: the lock is free.
    Free,
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
            };
            let grant = Grant {
                fence,
                count: 1,
                fresh: true,
            };
            Ok(Some((grant, Effect::Put { lock, deadline_ms })))
        }
        Some(l) if *l.holder == *holder => {
            let count = bump(l.count)?;
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
    let count = bump(l.count)?;
    let effect = Effect::Touch {
        count,
        deadline_ms: Some(now_ms.saturating_add(ttl_ms)),
    };
    Ok((count, effect))
}

/// `LOCK.RELEASE`: count - 1; the key goes at 0. Returns the remaining count.
pub fn release(key: &[u8], current: Option<&Lock>, holder: &[u8]) -> Result<(u64, Effect), Error> {
    let l = held_by(current, holder).ok_or_else(|| Error::not_held(key, holder))?;
    let count = l.count - 1;
    let effect = if count == 0 {
        Effect::Free
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
        count: l.count,
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
        bump(l.count)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn apply(cur: &mut Option<Lock>, eff: Effect) {
        match eff {
            Effect::Put { lock, .. } => *cur = Some(lock),
            Effect::Touch { count, .. } => cur.as_mut().unwrap().count = count,
            Effect::Free => *cur = None,
        }
    }

    #[test]
    fn acquire_reenter_release() {
        let mut f = FenceCounter::default();
        let mut cur = None;
        let (g, e) = acquire(None, b"a", 100, 10, &mut f).unwrap().unwrap();
        assert!(g.fresh && g.count == 1);
        assert_eq!(
            e,
            Effect::Put {
                lock: Lock {
                    holder: b"a"[..].into(),
                    count: 1,
                    fence: g.fence
                },
                deadline_ms: 110
            }
        );
        apply(&mut cur, e);
        let (g2, e) = acquire(cur.as_ref(), b"a", 50, 20, &mut f)
            .unwrap()
            .unwrap();
        assert_eq!((g2.fence, g2.count, g2.fresh), (g.fence, 2, false));
        assert_eq!(
            e,
            Effect::Touch {
                count: 2,
                deadline_ms: Some(70)
            }
        );
        apply(&mut cur, e);
        assert!(acquire(cur.as_ref(), b"b", 100, 20, &mut f)
            .unwrap()
            .is_none());
        let (n, e) = reenter(b"k", cur.as_ref(), b"a", 10, 30).unwrap();
        assert_eq!(n, 3);
        apply(&mut cur, e);
        for left in [2, 1] {
            let (n, e) = release(b"k", cur.as_ref(), b"a").unwrap();
            assert_eq!(n, left);
            assert_eq!(
                e,
                Effect::Touch {
                    count: left,
                    deadline_ms: None
                }
            );
            apply(&mut cur, e);
        }
        assert_eq!(
            release(b"k", cur.as_ref(), b"a").unwrap(),
            (0, Effect::Free)
        );
    }

    #[test]
    fn strangers_get_notheld_and_change_nothing() {
        let lock = Lock {
            holder: b"a"[..].into(),
            count: 1,
            fence: 9,
        };
        let nh = Error::NotHeld {
            key: b"k".to_vec(),
            holder: b"b"[..].into(),
        };
        assert_eq!(release(b"k", Some(&lock), b"b").unwrap_err(), nh);
        assert_eq!(extend(b"k", Some(&lock), b"b", 5, 0).unwrap_err(), nh);
        assert_eq!(reenter(b"k", Some(&lock), b"b", 5, 0).unwrap_err(), nh);
        assert!(
            reenter(b"k", None, b"b", 5, 0).is_err(),
            "reenter never acquires"
        );
        assert!(release(b"k", None, b"b").is_err());
        assert_eq!(
            extend(b"k", Some(&lock), b"a", 5, 100).unwrap(),
            Effect::Touch {
                count: 1,
                deadline_ms: Some(105)
            }
        );
    }

    #[test]
    fn count_overflow_is_an_error() {
        let lock = Lock {
            holder: b"a"[..].into(),
            count: MAX_COUNT,
            fence: 1,
        };
        let bound = Error::Bound {
            name: "reentry count",
            max: MAX_COUNT,
        };
        let mut f = FenceCounter::default();
        assert_eq!(acquire(Some(&lock), b"a", 5, 0, &mut f).unwrap_err(), bound);
        assert_eq!(reenter(b"k", Some(&lock), b"a", 5, 0).unwrap_err(), bound);
        let below = Lock {
            count: MAX_COUNT - 1,
            ..lock
        };
        assert_eq!(
            reenter(b"k", Some(&below), b"a", 5, 0).unwrap().0,
            MAX_COUNT
        );
    }

    #[test]
    fn multi_is_all_or_nothing() {
        let mut f = FenceCounter::default();
        let mine = Lock {
            holder: b"a"[..].into(),
            count: 1,
            fence: 5,
        };
        let theirs = Lock {
            holder: b"b"[..].into(),
            count: 1,
            fence: 6,
        };
        let before = f;
        assert!(macquire(&[None, Some(&theirs)], b"a", 10, 0, &mut f)
            .unwrap()
            .is_none());
        assert_eq!(f, before, "a refused multi-acquire consumes no fence");
        let got = macquire(&[None, Some(&mine)], b"a", 10, 0, &mut f)
            .unwrap()
            .unwrap();
        assert!(got[0].0.fresh && !got[1].0.fresh && got[1].0.fence == 5);
        let keys: [&[u8]; 2] = [b"x", b"y"];
        let err = mrelease(&keys, &[Some(&mine), Some(&theirs)], b"a").unwrap_err();
        assert_eq!(
            err,
            Error::NotHeld {
                key: b"y".to_vec(),
                holder: b"a"[..].into()
            }
        );
        let ok = mrelease(&keys, &[Some(&mine), Some(&mine)], b"a").unwrap();
        assert_eq!(ok.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0, 0]);
    }

    proptest! {
        /// Any sequence of operations by a few holders keeps the invariants:
        /// one holder at a time, count >= 1 while held, fences of fresh
        /// acquisitions strictly increasing, reentry keeps the fence.
        #[test]
        fn invariants_hold(ops in proptest::collection::vec((0u8..4, 0u8..3), 1..300)) {
            let mut f = FenceCounter::default();
            let mut cur: Option<Lock> = None;
            let mut last_fence = 0;
            let mut model: Option<(u8, u64)> = None;
            for (op, who) in ops {
                let h = [b'h', who];
                match op {
                    0 => match acquire(cur.as_ref(), &h, 10, 1, &mut f).unwrap() {
                        Some((g, e)) => {
                            if g.fresh { prop_assert!(g.fence > last_fence); last_fence = g.fence; }
                            else { prop_assert_eq!(g.fence, cur.as_ref().unwrap().fence); }
                            model = Some((who, model.map_or(0, |m| m.1) + 1));
                            apply(&mut cur, e);
                        }
                        None => prop_assert!(model.is_some() && model.unwrap().0 != who),
                    },
                    1 => match release(b"k", cur.as_ref(), &h) {
                        Ok((n, e)) => {
                            let (w, c) = model.unwrap();
                            prop_assert_eq!(w, who);
                            prop_assert_eq!(n, c - 1);
                            model = if n == 0 { None } else { Some((w, n)) };
                            apply(&mut cur, e);
                        }
                        Err(_) => prop_assert!(model.is_none_or(|m| m.0 != who)),
                    },
                    2 => { let ok = extend(b"k", cur.as_ref(), &h, 10, 1).is_ok(); prop_assert_eq!(ok, model.is_some_and(|m| m.0 == who)); }
                    _ => {
                        // The lease ran out: the key vanished.
                        cur = None; model = None;
                    }
                }
                prop_assert_eq!(cur.as_ref().map(|l| l.count), model.map(|m| m.1));
            }
        }
    }
}
