//! One smoke test of the built module from Rust, over a plain RESP
//! exchange on loopback (the behaviour itself is tested by the Python
//! suites on every server): the `.so` loads, a lock goes round, a bad
//! argument is an error reply, and the server is still there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child, PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend(*a);
        out.extend(b"\r\n");
    }
    out
}

/// One reply: its line, or a bulk string's body.
fn reply(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("a reply");
    let line = line.trim_end().to_string();
    if let Some(n) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
        let mut body = vec![0; n + 2];
        r.read_exact(&mut body).expect("a bulk body");
        return String::from_utf8_lossy(&body[..n]).into_owned();
    }
    line
}

#[test]
fn module_loads_and_a_lock_goes_round() {
    let so = std::env::var_os("PADLOCK_SO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/libpadlock.so")
        });
    assert!(so.exists(), "build the module first: {}", so.display());
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let dir = std::env::temp_dir().join(format!("padlock-smoke-{port}"));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let child = Command::new(std::env::var("PADLOCK_SERVER").unwrap_or("redis-server".into()))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--loadmodule")
        .arg(&so)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server runs");
    let _server = Server(child, dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no server on {port}: {e}"),
        }
    };
    let mut w = stream.try_clone().expect("a second handle");
    let mut r = BufReader::new(stream);
    let mut ask = |args: &[&[u8]]| {
        w.write_all(&command(args)).expect("sent");
        reply(&mut r)
    };
    let fence = ask(&[b"LOCK.ACQUIRE", b"k", b"me", b"5000"]);
    let fence: u64 = fence.trim_start_matches(':').parse().expect("a fence");
    assert!(fence > 0 && fence < 1 << 53);
    assert_eq!(ask(&[b"LOCK.ACQUIRE", b"k", b"you", b"5000"]), "$-1", "nil");
    assert_eq!(ask(&[b"LOCK.RELEASE", b"k", b"me"]), ":0");
    assert!(ask(&[b"LOCK.ACQUIRE", b"k", b"me", b"0100"]).starts_with("-ERR ttl-ms"));
    assert_eq!(ask(&[b"PING"]), "+PONG");
}
