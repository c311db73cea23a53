//! Blocking hand-off and deadlock detection against a live server.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{call, Server};

fn blocked(c: &mut redis::Connection) -> i64 {
    let info: String = call(c, &["INFO", "padlock"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("padlock_blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

fn wait_blocked(c: &mut redis::Connection, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked(c) != n {
        assert!(Instant::now() < deadline, "expected {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn release_hands_the_lock_to_the_waiter() {
    let s = Server::start();
    let mut c = s.conn();
    let _: i64 = call(&mut c, &["LOCK.ACQUIRE", "k", "a", "10000"]).unwrap();
    let mut w = s.conn();
    let waiter = thread::spawn(move || -> Option<i64> {
        call(&mut w, &["LOCK.ACQUIRE", "k", "b", "10000", "BLOCK", "0"]).unwrap()
    });
    wait_blocked(&mut c, 1);
    let _: i64 = call(&mut c, &["LOCK.RELEASE", "k", "a"]).unwrap();
    assert!(waiter.join().unwrap().is_some());
    let err = call::<i64>(&mut c, &["LOCK.RELEASE", "k", "a"]).unwrap_err();
    assert_eq!(err.code(), Some("NOTHELD"), "b holds it now");
}

#[test]
fn block_times_out_with_nil() {
    let s = Server::start();
    let mut c = s.conn();
    let _: i64 = call(&mut c, &["LOCK.ACQUIRE", "k", "a", "10000"]).unwrap();
    let t = Instant::now();
    let got: Option<i64> =
        call(&mut c, &["LOCK.ACQUIRE", "k", "b", "1000", "BLOCK", "100"]).unwrap();
    assert_eq!(got, None);
    assert!(t.elapsed() >= Duration::from_millis(90));
    assert_eq!(blocked(&mut c), 0);
}

#[test]
fn deadlock_is_reported_at_once() {
    let s = Server::start();
    let mut c = s.conn();
    for (k, h) in [("a", "t1"), ("b", "t2")] {
        let _: i64 = call(&mut c, &["LOCK.ACQUIRE", k, h, "10000"]).unwrap();
    }
    let declared: i64 = call(&mut c, &["LOCK.WAITFOR", "a", "t2", "5000"]).unwrap();
    assert_eq!(declared, 1);
    let err = call::<Option<i64>>(&mut c, &["LOCK.ACQUIRE", "b", "t1", "1000", "BLOCK", "0"])
        .unwrap_err();
    assert_eq!(err.code(), Some("DEADLOCK"));
    assert!(
        err.to_string().contains("t1 -> b -> t2 -> a -> t1"),
        "{err}"
    );
}
