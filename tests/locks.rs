//! Main lock paths against a live server, through the `redis` crate.

mod common;

use common::Server;
use redis::{cmd, Value};

fn acquire(c: &mut redis::Connection, key: &str, holder: &str, ttl: i64) -> Option<i64> {
    cmd("LOCK.ACQUIRE")
        .arg(key)
        .arg(holder)
        .arg(ttl)
        .query(c)
        .unwrap()
}

#[test]
fn acquire_reenter_release_round_trip() {
    let s = Server::start();
    let mut c = s.conn();
    let f = acquire(&mut c, "k", "me", 5000).expect("free lock");
    assert_eq!(acquire(&mut c, "k", "me", 5000), Some(f));
    assert_eq!(acquire(&mut c, "k", "you", 5000), None);
    let n: i64 = cmd("LOCK.REENTER")
        .arg("k")
        .arg("me")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    for left in [2, 1, 0] {
        let n: i64 = cmd("LOCK.RELEASE")
            .arg("k")
            .arg("me")
            .query(&mut c)
            .unwrap();
        assert_eq!(n, left);
    }
    let gone: Value = cmd("LOCK.INFO").arg("k").query(&mut c).unwrap();
    assert_eq!(gone, Value::Nil);
}

#[test]
fn notheld_is_an_error_reply() {
    let s = Server::start();
    let mut c = s.conn();
    let err = cmd("LOCK.RELEASE")
        .arg("k")
        .arg("me")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOTHELD"));
    let err = cmd("LOCK.EXTEND")
        .arg("k")
        .arg("me")
        .arg(0)
        .query::<i64>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("ttl-ms must be an integer"));
}

#[test]
fn fences_increase_across_keys_and_reloads() {
    let s = Server::start();
    let mut c = s.conn();
    let mut last = 0;
    for i in 0..20 {
        let f = acquire(&mut c, &format!("k{i}"), "me", 60_000).unwrap();
        assert!(f > last);
        last = f;
    }
    let _: () = cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    let f = acquire(&mut c, "after", "me", 60_000).unwrap();
    assert!(f > last);
}

#[test]
fn multi_key_all_or_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "b", "other", 5000).unwrap();
    let none: Option<Vec<i64>> = cmd("LOCK.MACQUIRE")
        .arg(2)
        .arg("a")
        .arg("b")
        .arg("me")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(none, None);
    let exists: i64 = cmd("EXISTS").arg("a").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    let fences: Vec<i64> = cmd("LOCK.MACQUIRE")
        .arg(2)
        .arg("a")
        .arg("c")
        .arg("me")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert!(fences[0] < fences[1]);
}

#[test]
fn garbage_never_kills_the_server() {
    let mut s = Server::start();
    let mut c = s.conn();
    let words: [&[u8]; 8] = [
        b"",
        b"0",
        b"-1",
        b"BLOCK",
        b"PERMITS",
        b"\0\r\n",
        b"99999999999999999999",
        b"k",
    ];
    for name in [
        "LOCK.ACQUIRE",
        "LOCK.MACQUIRE",
        "LOCK.MRELEASE",
        "SEM.ACQUIRE",
        "SEM.RELEASE",
    ] {
        for n in 0..6 {
            for w in words {
                let mut q = cmd(name);
                for _ in 0..n {
                    q.arg(w);
                }
                let _: redis::RedisResult<Value> = q.query(&mut c);
            }
        }
    }
    assert!(s.alive());
}
