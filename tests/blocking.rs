//! Blocking hand-off and deadlock detection against a live server.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use redis::cmd;

fn blocked(c: &mut redis::Connection) -> i64 {
    let info: String = cmd("INFO").arg("padlock").query(c).unwrap();
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
    let _: i64 = cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("a")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let mut w = s.conn();
    let waiter = thread::spawn(move || -> Option<i64> {
        cmd("LOCK.ACQUIRE")
            .arg("k")
            .arg("b")
            .arg(10_000)
            .arg("BLOCK")
            .arg(0)
            .query(&mut w)
            .unwrap()
    });
    wait_blocked(&mut c, 1);
    let _: i64 = cmd("LOCK.RELEASE").arg("k").arg("a").query(&mut c).unwrap();
    assert!(waiter.join().unwrap().is_some());
    let err = cmd("LOCK.RELEASE")
        .arg("k")
        .arg("a")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOTHELD"), "b holds it now");
}

#[test]
fn block_times_out_with_nil() {
    let s = Server::start();
    let mut c = s.conn();
    let _: i64 = cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("a")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let t = Instant::now();
    let got: Option<i64> = cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("b")
        .arg(1000)
        .arg("BLOCK")
        .arg(100)
        .query(&mut c)
        .unwrap();
    assert_eq!(got, None);
    assert!(t.elapsed() >= Duration::from_millis(90));
    assert_eq!(blocked(&mut c), 0);
}

#[test]
fn deadlock_is_reported_at_once() {
    let s = Server::start();
    let mut c = s.conn();
    for (k, h) in [("a", "t1"), ("b", "t2")] {
        let _: i64 = cmd("LOCK.ACQUIRE")
            .arg(k)
            .arg(h)
            .arg(10_000)
            .query(&mut c)
            .unwrap();
    }
    let waitfor: i64 = cmd("LOCK.WAITFOR")
        .arg("a")
        .arg("t2")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(waitfor, 1);
    let err = cmd("LOCK.ACQUIRE")
        .arg("b")
        .arg("t1")
        .arg(1000)
        .arg("BLOCK")
        .arg(0)
        .query::<Option<i64>>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("DEADLOCK"));
    assert!(
        err.to_string().contains("t1 -> b -> t2 -> a -> t1"),
        "{err}"
    );
}
