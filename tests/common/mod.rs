//! A live `redis-server` with the module loaded, on a free loopback port in
//! a temp dir, killed on drop. The module file comes from `PADLOCK_SO`
//! (set by `make test`) or `target/release/libpadlock.so`.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

fn module_path() -> PathBuf {
    std::env::var_os("PADLOCK_SO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/libpadlock.so")
        })
}

impl Server {
    pub fn start() -> Server {
        let so = module_path();
        assert!(so.exists(), "build the module first: {}", so.display());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = std::env::temp_dir().join(format!("padlock-it-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let child = Command::new(std::env::var("PADLOCK_SERVER").unwrap_or("redis-server".into()))
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(&so)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let server = Server { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut c) = server.try_conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return server;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start on port {port}");
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect")
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let crashed = !self.alive();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        if crashed && !std::thread::panicking() {
            panic!("redis-server on port {} had died", self.port);
        }
    }
}

/// One command from string arguments: `call(&mut c, &["LOCK.INFO", "k"])`.
pub fn call<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    redis::cmd(args[0]).arg(&args[1..]).query(c)
}
