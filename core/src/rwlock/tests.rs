use super::*;
use proptest::prelude::*;

const T: i64 = 1000;

fn acq(
    l: &mut RwLock,
    h: &[u8],
    mode: Mode,
    queued: bool,
    now: i64,
    f: &mut FenceCounter,
) -> Option<u64> {
    let (g, e) = l.acquire(h, mode, queued, T, now, f).unwrap()?;
    l.apply(&e);
    Some(g.fence)
}

fn rel(l: &mut RwLock, h: &[u8], mode: Mode) -> Result<(u64, u64), Error> {
    let (left, e) = l.release(b"k", h, mode)?;
    l.apply(&e);
    Ok(left)
}

#[test]
fn readers_share_writer_is_alone() {
    let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
    let a = acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    let b = acq(&mut l, b"b", Mode::Read, false, 0, &mut f).unwrap();
    assert!(b > a, "each holder its own fence");
    assert_eq!(acq(&mut l, b"w", Mode::Write, false, 0, &mut f), None);
    assert_eq!(
        acq(&mut l, b"a", Mode::Read, true, 0, &mut f),
        Some(a),
        "reentry ignores the queue"
    );
    rel(&mut l, b"a", Mode::Read).unwrap();
    assert_eq!(rel(&mut l, b"a", Mode::Read), Ok((0, 0)));
    rel(&mut l, b"b", Mode::Read).unwrap();
    assert!(l.is_empty());
    let w = acq(&mut l, b"w", Mode::Write, false, 0, &mut f).unwrap();
    assert_eq!(acq(&mut l, b"r", Mode::Read, false, 0, &mut f), None);
    assert_eq!(
        acq(&mut l, b"w", Mode::Write, true, 0, &mut f),
        Some(w),
        "writer reenters"
    );
    assert_eq!(l.writer(), Some(&b"w"[..]));
}

#[test]
fn newcomers_queue_behind_waiters() {
    let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
    acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    assert_eq!(
        acq(&mut l, b"b", Mode::Read, true, 0, &mut f),
        None,
        "a writer may be queued"
    );
    assert_eq!(acq(&mut l, b"w", Mode::Write, true, 0, &mut f), None);
}

#[test]
fn upgrade_and_downgrade() {
    let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
    let a = acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    acq(&mut l, b"b", Mode::Read, false, 0, &mut f).unwrap();
    assert!(l.is_upgrade(b"a", Mode::Write));
    assert_eq!(
        acq(&mut l, b"a", Mode::Write, false, 0, &mut f),
        None,
        "b still reads"
    );
    rel(&mut l, b"b", Mode::Read).unwrap();
    assert_eq!(
        acq(&mut l, b"a", Mode::Write, true, 0, &mut f),
        Some(a),
        "alone: upgraded, same fence"
    );
    assert_eq!(l.holder(b"a").map(|e| (e.reads, e.writes)), Some((1, 1)));
    // Downgrade: a read hold is always granted to the writer, then the write goes.
    acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    assert_eq!(rel(&mut l, b"a", Mode::Write), Ok((2, 0)));
    assert_eq!(l.writer(), None);
    assert!(
        acq(&mut l, b"c", Mode::Read, false, 0, &mut f).is_some(),
        "others read again"
    );
}

#[test]
fn release_of_a_mode_not_held_changes_nothing() {
    let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
    acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    let before = l.clone();
    assert!(rel(&mut l, b"a", Mode::Write).is_err());
    assert!(rel(&mut l, b"x", Mode::Read).is_err());
    assert_eq!(l, before);
}

#[test]
fn leases_run_out_one_by_one() {
    let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
    acq(&mut l, b"a", Mode::Read, false, 0, &mut f).unwrap();
    acq(&mut l, b"b", Mode::Read, false, 500, &mut f).unwrap();
    assert_eq!(
        (l.earliest_deadline(), l.latest_deadline()),
        (Some(T), Some(500 + T))
    );
    let gone = l.expire(T);
    assert_eq!(gone.len(), 1);
    l.apply(&gone[0]);
    assert_eq!(l.live(T).count(), 1);
    let e = l.extend(b"k", b"b", 10_000, 600).unwrap();
    l.apply(&e);
    assert_eq!(l.latest_deadline(), Some(10_600));
    assert!(l.extend(b"k", b"a", 10, 0).is_err());
}

/// The grant rule the naive way, for the property test.
fn model_grants(l: &RwLock, h: &[u8], mode: Mode, queued: bool) -> bool {
    let mine = l.holders().find(|(x, _)| *x == h).map(|(_, e)| e);
    let others: Vec<Entry> = l
        .holders()
        .filter(|(x, _)| *x != h)
        .map(|(_, e)| e)
        .collect();
    match (mode, mine) {
        (Mode::Read, Some(_)) => true,
        (Mode::Read, None) => !queued && others.iter().all(|e| e.writes == 0),
        (Mode::Write, Some(e)) => e.writes > 0 || others.is_empty(),
        (Mode::Write, None) => !queued && others.is_empty(),
    }
}

proptest! {
    /// Never a writer beside another holder; every holder holds something;
    /// fences of new holders increase and stay put while held; the deadline
    /// index mirrors the holders; grants follow the naive rule.
    #[test]
    fn invariants(ops in proptest::collection::vec((0u8..5, 0u8..4, any::<bool>(), 1i64..400), 1..300)) {
        let (mut l, mut f) = (RwLock::default(), FenceCounter::new());
        let mut now = 0;
        let mut last_fence = 0;
        for (op, who, flag, dt) in ops {
            let h = [who];
            let mode = if flag { Mode::Read } else { Mode::Write };
            match op {
                0 | 1 => {
                    let queued = op == 1;
                    let before = l.holder(&h);
                    let expect = model_grants(&l, &h, mode, queued);
                    let got = acq(&mut l, &h, mode, queued, now, &mut f);
                    prop_assert_eq!(got.is_some(), expect);
                    if let Some(fence) = got {
                        match before {
                            Some(e) => prop_assert_eq!(fence, e.fence),
                            None => { prop_assert!(fence > last_fence); last_fence = fence; }
                        }
                    }
                }
                2 => { let _ = rel(&mut l, &h, mode); }
                3 => { if let Ok(e) = l.extend(b"k", &h, dt, now) { l.apply(&e); } }
                _ => {
                    now += dt;
                    for e in l.expire(now) { l.apply(&e); }
                    prop_assert!(l.holders().all(|(_, e)| e.deadline_ms > now));
                }
            }
            let writers: Vec<_> = l.holders().filter(|(_, e)| e.writes > 0).map(|(x, _)| x.to_vec()).collect();
            prop_assert!(writers.len() <= 1);
            if let Some(w) = writers.first() {
                prop_assert_eq!(l.len(), 1, "a writer is alone");
                prop_assert_eq!(l.writer(), Some(&w[..]));
            } else {
                prop_assert_eq!(l.writer(), None);
            }
            prop_assert!(l.holders().all(|(_, e)| e.reads + e.writes > 0));
            prop_assert!(l.holders.consistent());
        }
    }
}

/// A hold starts with the holder's first hold of either mode and ends with
/// its last; an upgrade keeps the start.
#[test]
fn a_hold_keeps_its_start() {
    let mut l = RwLock::default();
    let mut f = FenceCounter::default();
    acq(&mut l, b"a", Mode::Read, false, 10, &mut f).unwrap();
    acq(&mut l, b"a", Mode::Write, false, 20, &mut f).unwrap();
    assert_eq!(l.holder(b"a").unwrap().since, Since::at(10));
    let (_, e) = l.release(b"k", b"a", Mode::Write).unwrap();
    assert_eq!(l.apply(&e), None);
    let (_, e) = l.release(b"k", b"a", Mode::Read).unwrap();
    assert_eq!(l.apply(&e).map(|o| o.since), Some(Since::at(10)));
}
