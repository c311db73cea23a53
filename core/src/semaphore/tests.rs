use super::*;
use proptest::prelude::*;

/// Decides and applies, as the glue does.
fn acq(s: &mut Semaphore, h: &[u8], limit: u64, n: u64, ttl: i64, now: i64) -> Option<u64> {
    let (total, e) = s.acquire(h, limit, n, ttl, now)?;
    s.apply(&e);
    Some(total)
}

fn rel(s: &mut Semaphore, h: &[u8], n: Option<u64>) -> Result<u64, Error> {
    let (left, e) = s.release(b"k", h, n)?;
    s.apply(&e);
    Ok(left)
}

fn exp(s: &mut Semaphore, now: i64) -> Vec<Vec<u8>> {
    let gone = s.expire(now);
    for e in &gone {
        s.apply(e);
    }
    gone.into_iter().map(|e| e.holder.into_owned()).collect()
}

fn rec(s: &mut Semaphore, h: &[u8], n: u64, ttl: i64, now: i64) {
    let e = s.recreate(h, n, ttl, now);
    s.apply(&e);
}

/// A hold starts at the holder's first permit and ends with its last:
/// more permits or a renewal keep the start; an effect from the
/// replication stream brings none.
#[test]
fn a_hold_keeps_its_start() {
    let mut s = Semaphore::new(3);
    acq(&mut s, b"a", 3, 1, 100, 10);
    acq(&mut s, b"a", 3, 1, 100, 20);
    let e = s.extend(b"k", b"a", 100, 30).unwrap();
    assert_eq!(s.apply(&e), None);
    let (_, e) = s.release(b"k", b"a", Some(1)).unwrap();
    assert_eq!(s.apply(&e), None, "one permit left: still held");
    let (_, e) = s.release(b"k", b"a", None).unwrap();
    assert_eq!(s.apply(&e).map(|o| o.since), Some(Since::at(10)));
    s.apply(&Effect::set(b"r", 3, 1, 500));
    assert_eq!(s.holder(b"r").map(|e| e.since), Some(Since::UNKNOWN));
}

#[test]
fn acquire_within_limit_and_reentrant() {
    let mut s = Semaphore::new(3);
    assert_eq!(acq(&mut s, b"a", 3, 2, 100, 0), Some(2));
    assert_eq!(acq(&mut s, b"b", 3, 2, 100, 0), None, "only 1 left");
    assert_eq!(acq(&mut s, b"a", 3, 1, 100, 0), Some(3), "reentry adds up");
    assert_eq!((s.used(), s.limit()), (3, 3));
}

#[test]
fn failed_request_keeps_limit() {
    let mut s = Semaphore::new(2);
    acq(&mut s, b"a", 2, 2, 100, 0);
    assert_eq!(acq(&mut s, b"b", 5, 4, 100, 0), None);
    assert_eq!(s.limit(), 2, "a failed request changes nothing");
    assert_eq!(acq(&mut s, b"b", 5, 3, 100, 0), Some(3));
    assert_eq!(s.limit(), 5);
}

#[test]
fn lower_limit_takes_nothing_away() {
    let mut s = Semaphore::new(5);
    acq(&mut s, b"a", 5, 4, 100, 0);
    assert_eq!(acq(&mut s, b"b", 2, 1, 100, 0), None);
    assert_eq!(s.holder(b"a").unwrap().permits, 4);
    assert_eq!((s.limit(), s.used()), (5, 4), "the stored limit is still 5");
}

#[test]
fn holders_expire_one_by_one() {
    let mut s = Semaphore::new(2);
    acq(&mut s, b"short", 2, 1, 100, 0);
    acq(&mut s, b"long", 2, 1, 500, 0);
    assert_eq!(s.latest_deadline(), Some(500));
    assert_eq!(s.earliest_deadline(), Some(100));
    assert_eq!(s.view(150).holders.len(), 1);
    assert_eq!(s.len(), 2, "view changes nothing");
    assert_eq!(exp(&mut s, 99), Vec::<Vec<u8>>::new());
    assert_eq!(exp(&mut s, 100), vec![b"short".to_vec()]);
    assert_eq!((s.used(), s.latest_deadline()), (1, Some(500)));
    assert_eq!(exp(&mut s, 1000), vec![b"long".to_vec()]);
    assert!(s.is_empty());
}

#[test]
fn release_partial_and_all() {
    let mut s = Semaphore::new(5);
    acq(&mut s, b"a", 5, 4, 100, 0);
    assert_eq!(rel(&mut s, b"a", Some(1)), Ok(3));
    assert!(rel(&mut s, b"a", Some(4)).is_err());
    assert_eq!(s.used(), 3, "a refused release changes nothing");
    assert!(rel(&mut s, b"b", None).is_err());
    assert_eq!(rel(&mut s, b"a", None), Ok(0));
    assert!(s.is_empty());
}

#[test]
fn recreated_limit_follows_recreated_permits() {
    let mut s = Semaphore::new(0);
    rec(&mut s, b"a", 2, 100, 0);
    rec(&mut s, b"b", 3, 100, 0);
    assert_eq!((s.limit(), s.used()), (5, 5));
    assert_eq!(acq(&mut s, b"c", 8, 1, 100, 0), Some(1));
    rec(&mut s, b"d", 1, 100, 0);
    assert_eq!(s.limit(), 8, "a SEM.ACQUIRE set the limit");
}

#[test]
fn extend_moves_the_deadline() {
    let mut s = Semaphore::new(1);
    acq(&mut s, b"a", 1, 1, 100, 0);
    let e = s.extend(b"k", b"a", 1000, 50).unwrap();
    s.apply(&e);
    assert!(exp(&mut s, 200).is_empty());
    assert_eq!(s.holder(b"a").unwrap().deadline_ms, 1050);
    assert!(s.extend(b"k", b"b", 10, 0).is_err());
}

proptest! {
    /// used <= limit after any sequence that starts within the limit and
    /// never lowers it; used always equals the sum of permits; the
    /// deadline index mirrors the holders.
    #[test]
    fn used_never_exceeds_limit(ops in proptest::collection::vec((0u8..4, 0u8..5, 1u64..4, 1i64..50), 1..300)) {
        let limit = 6;
        let mut s = Semaphore::new(limit);
        let mut now = 0;
        for (op, who, n, dt) in ops {
            let h = [who];
            match op {
                0 => { acq(&mut s, &h, limit, n, dt * 3, now); }
                1 => { let _ = rel(&mut s, &h, if n == 3 { None } else { Some(n) }); }
                2 => { if let Ok(e) = s.extend(b"k", &h, dt, now) { s.apply(&e); } }
                _ => { now += dt; let gone = exp(&mut s, now); for g in gone { prop_assert!(s.holder(&g).is_none()); } }
            }
            prop_assert!(s.used() <= limit);
            prop_assert_eq!(s.used(), s.holders().map(|(_, e)| e.permits).sum::<u64>());
            prop_assert!(s.holders.consistent());
            prop_assert!(s.holders().all(|(_, e)| e.permits > 0));
        }
    }
}
