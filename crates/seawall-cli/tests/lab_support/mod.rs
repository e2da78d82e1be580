//! What the `lab --target` tests share: the binary, a small HTTP server, free ports, process
//! checks.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(crate) fn seawall() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seawall"))
}

/// Kills the child on drop, whatever the test's outcome.
pub(crate) struct Guard(pub(crate) Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free a moment ago.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Stops the server's accept loop on drop.
pub(crate) struct Stop(Arc<AtomicBool>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// An HTTP/1.1 server on a free loopback port answering every request `200 ok` (keep-alive),
/// a thread per connection; stops accepting when the returned guard drops.
pub(crate) fn http_server() -> (u16, Stop) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((c, _)) => {
                    std::thread::spawn(move || serve(c));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, Stop(stop))
}

fn serve(mut c: TcpStream) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // A request without a body: its head ends at the blank line.
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                return;
            }
        }
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 1 << 16 {
            return;
        }
    }
}

/// Whether process `pid` is alive: in /proc and not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last ')'.
        Ok(s) => s.rsplit_once(')').is_some_and(|(_, r)| !r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Polls `f` every 50 ms until it holds or `limit` passes.
pub(crate) fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

pub(crate) fn read_json(path: &std::path::Path) -> serde_json::Value {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&s).unwrap()
}

/// `seawall lab --target http://127.0.0.1:EDGE{path} --proxy dep=127.0.0.1:PROXY,127.0.0.1:DEP`.
pub(crate) fn lab_on(edge: u16, path: &str, proxy: u16, dep: u16) -> Command {
    let mut c = seawall();
    c.args(["lab", "--target", &format!("http://127.0.0.1:{edge}{path}")])
        .args(["--proxy", &format!("dep=127.0.0.1:{proxy},127.0.0.1:{dep}")]);
    c
}

/// Runs a `seawall lab` command to its end; panics with its stderr if it failed, prints its
/// stdout (the tables) otherwise.
pub(crate) fn run_ok(cmd: &mut Command) {
    let run = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    eprintln!("{}", String::from_utf8_lossy(&run.stdout));
}
