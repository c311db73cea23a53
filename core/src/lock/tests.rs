use super::*;
use proptest::prelude::*;

fn apply(cur: &mut Option<Lock>, eff: Effect) {
    match eff {
        Effect::Put { lock, .. } => *cur = Some(lock),
        Effect::Touch { count, .. } => cur.as_mut().unwrap().count = count as u32,
        Effect::Free { .. } => *cur = None,
    }
}

/// A held lock is one allocation of the allocator's 32-byte class (a
/// 40-byte value would take a 48-byte one).
#[test]
fn a_lock_is_32_bytes() {
    assert_eq!(std::mem::size_of::<Lock>(), 32);
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
                fence: g.fence,
                since: Since::at(10),
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
        (
            0,
            Effect::Free {
                since: Since::at(10)
            }
        )
    );
}

#[test]
fn strangers_get_notheld_and_change_nothing() {
    let lock = Lock {
        holder: b"a"[..].into(),
        count: 1,
        fence: 9,
        since: Since::UNKNOWN,
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
        count: MAX_COUNT as u32,
        fence: 1,
        since: Since::UNKNOWN,
    };
    let bound = Error::Bound {
        name: "reentry count",
        max: MAX_COUNT,
    };
    let mut f = FenceCounter::default();
    assert_eq!(acquire(Some(&lock), b"a", 5, 0, &mut f).unwrap_err(), bound);
    assert_eq!(reenter(b"k", Some(&lock), b"a", 5, 0).unwrap_err(), bound);
    let below = Lock {
        count: MAX_COUNT as u32 - 1,
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
        since: Since::UNKNOWN,
    };
    let theirs = Lock {
        holder: b"b"[..].into(),
        count: 1,
        fence: 6,
        since: Since::UNKNOWN,
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
            prop_assert_eq!(cur.as_ref().map(|l| u64::from(l.count)), model.map(|m| m.1));
        }
    }
}
