//! Main semaphore paths against a live server.

mod common;

use common::Server;
use redis::{cmd, Value};

fn acquire(c: &mut redis::Connection, holder: &str, limit: i64, ttl: i64, n: i64) -> Option<i64> {
    cmd("SEM.ACQUIRE")
        .arg("s")
        .arg(holder)
        .arg(limit)
        .arg(ttl)
        .arg("PERMITS")
        .arg(n)
        .query(c)
        .unwrap()
}

#[test]
fn permits_add_up_and_return() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(acquire(&mut c, "a", 3, 5000, 2), Some(2));
    assert_eq!(acquire(&mut c, "b", 3, 5000, 2), None);
    assert_eq!(acquire(&mut c, "a", 3, 5000, 1), Some(3));
    let left: i64 = cmd("SEM.RELEASE")
        .arg("s")
        .arg("a")
        .arg("PERMITS")
        .arg(2)
        .query(&mut c)
        .unwrap();
    assert_eq!(left, 1);
    assert_eq!(acquire(&mut c, "b", 3, 5000, 2), Some(2));
    let err = cmd("SEM.RELEASE")
        .arg("s")
        .arg("nobody")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOTHELD"));
}

#[test]
fn each_holder_has_its_own_lease() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "short", 2, 100, 1).unwrap();
    acquire(&mut c, "long", 2, 5000, 1).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(
        acquire(&mut c, "new", 2, 5000, 1),
        Some(1),
        "short's permit came back"
    );
    let info: Value = cmd("SEM.INFO").arg("s").query(&mut c).unwrap();
    let text = format!("{info:?}");
    assert!(text.contains("long") && text.contains("new") && !text.contains("short"));
}

#[test]
fn survives_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", 5, 60_000, 3).unwrap();
    let _: () = cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(acquire(&mut c, "b", 5, 60_000, 3), None);
    assert_eq!(acquire(&mut c, "b", 5, 60_000, 2), Some(2));
}
