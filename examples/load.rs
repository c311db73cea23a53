//! A pipelined load generator for `make bench`: like `redis-benchmark -P`,
//! but with every command on its own key in sequence (`{i}` in an argument
//! is the command's number), so that a release frees a lock that is really
//! held and an extend finds its lock. `redis-benchmark` only has random
//! keys, which collide.
//!
//!     load PORT CONNECTIONS PIPELINE TOTAL ARG...
//!
//! Prints `<requests per second> <error replies>`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: load PORT CONNECTIONS PIPELINE TOTAL ARG...");
    std::process::exit(2)
}

fn number(s: Option<String>) -> usize {
    s.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

/// The command number `i` in RESP.
fn encode(out: &mut Vec<u8>, template: &[String], i: usize) {
    out.extend_from_slice(format!("*{}\r\n", template.len()).as_bytes());
    for arg in template {
        let arg = arg.replace("{i}", &i.to_string());
        out.extend_from_slice(format!("${}\r\n{}\r\n", arg.len(), arg).as_bytes());
    }
}

/// Reads one reply; true when it is an error.
fn read_reply(r: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    r.read_until(b'\n', line)?;
    let (kind, rest) = match line.split_first() {
        Some((k, rest)) => (*k, rest),
        None => return Err(std::io::ErrorKind::UnexpectedEof.into()),
    };
    let n: i64 = std::str::from_utf8(rest)
        .ok()
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or(0);
    match kind {
        b'-' => Ok(true),
        b'$' if n >= 0 => {
            let mut skip = vec![0; n as usize + 2];
            r.read_exact(&mut skip)?;
            Ok(false)
        }
        b'*' => {
            let mut err = false;
            for _ in 0..n.max(0) {
                err |= read_reply(r, line)?;
            }
            Ok(err)
        }
        _ => Ok(false),
    }
}

fn run(
    port: u16,
    pipeline: usize,
    indexes: Vec<usize>,
    template: &[String],
) -> std::io::Result<(u64, TcpStream)> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone()?);
    let mut writer = stream;
    let (mut buf, mut line, mut errors) = (Vec::new(), Vec::new(), 0);
    for chunk in indexes.chunks(pipeline) {
        buf.clear();
        for &i in chunk {
            encode(&mut buf, template, i);
        }
        writer.write_all(&buf)?;
        for _ in chunk {
            errors += u64::from(read_reply(&mut reader, &mut line)?);
        }
    }
    // The connection is closed by the caller once every worker is done: a
    // close ends the connection's KEEP bindings, work the server must not
    // do while the others are still being timed.
    Ok((errors, writer))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port = number(args.next()) as u16;
    let conns = number(args.next()).max(1);
    let pipeline = number(args.next()).max(1);
    let total = number(args.next());
    let template: Arc<Vec<String>> = Arc::new(args.collect());
    if template.is_empty() {
        usage();
    }
    let barrier = Arc::new(Barrier::new(conns + 1));
    let workers: Vec<_> = (0..conns)
        .map(|c| {
            let (barrier, template) = (barrier.clone(), template.clone());
            let indexes: Vec<usize> = (c..total).step_by(conns).collect();
            std::thread::spawn(move || {
                barrier.wait();
                run(port, pipeline, indexes, &template)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let (mut errors, mut open) = (0, Vec::new());
    for w in workers {
        match w.join() {
            Ok(Ok((e, stream))) => {
                errors += e;
                open.push(stream);
            }
            _ => {
                eprintln!("load: a connection failed");
                std::process::exit(1)
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    drop(open);
    println!("{:.0} {}", total as f64 / secs, errors);
}
