//! Test support shared by the workspace's tests: the one rule for tests that need a program
//! the workspace does not build, free loopback ports, and child processes stopped on drop.
//!
//! # Tests that need an external program
//!
//! libtest on stable Rust cannot mark a test skipped once it has started, so a test that needs
//! a third-party program (Prometheus, nginx, HAProxy, wrk, Python packages, a PostgreSQL or
//! Redis server) is `#[ignore = "needs …"]`: plain `cargo test` lists it as `ignored, needs …`
//! in its normal output and in its closing count, and
//! `cargo test --workspace --tests -- --ignored` runs exactly those. Such a test starts with
//! [`require_external`] (or [`require_python`], [`require_service`]), which fails the test
//! with what to install when the program is missing: a test that was asked to run never
//! passes without having run.
#![warn(missing_docs)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where each external program comes from: the Debian package and the `.ci/setup` script that
/// installs it.
const SOURCES: &[(&str, &str)] = &[
    ("prometheus", "Debian package prometheus (.ci/setup/prometheus.sh)"),
    ("promtool", "Debian package prometheus (.ci/setup/prometheus.sh)"),
    ("nginx", "Debian package nginx (.ci/setup/stack.sh)"),
    ("haproxy", "Debian package haproxy (.ci/setup/stack.sh)"),
    ("wrk", "Debian package wrk (.ci/setup/stack.sh)"),
    ("python3", "Debian package python3"),
];

fn source(name: &str) -> &'static str {
    SOURCES.iter().find(|(n, _)| *n == name).map_or("your package manager", |(_, s)| s)
}

/// A program found on PATH or in the sbin folders Debian installs daemons in.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The path of external program `name`; fails the test, saying what to install, when it is
/// missing. Call it first in a test marked `#[ignore = "needs NAME"]`.
///
/// # Panics
///
/// When `name` is on neither PATH nor the sbin folders.
pub fn require_external(name: &str) -> PathBuf {
    find_program(name).unwrap_or_else(|| {
        panic!("this test needs `{name}`, which is not installed: {}", source(name))
    })
}

/// `python3`, after checking that it imports every module in `modules`; fails the test with
/// `install` (the pip command or setup script) when one is missing.
///
/// # Panics
///
/// When python3 is missing or cannot import one of `modules`.
pub fn require_python(modules: &[&str], install: &str) -> PathBuf {
    let py = require_external("python3");
    let import = format!("import {}", modules.join(", "));
    let ok = Command::new(&py)
        .args(["-c", &import])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "this test needs the Python modules {modules:?}, not all importable: {install}");
    py
}

/// Checks that a server (`what`: "PostgreSQL", "Redis") accepts TCP connections at `addr`;
/// fails the test, saying so, when none does.
///
/// # Panics
///
/// When nothing accepts a connection at `addr` within a second.
pub fn require_service(what: &str, addr: SocketAddr) {
    let ok = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok();
    assert!(ok, "this test needs {what} listening on {addr}, and nothing answers there");
}

/// A loopback port free a moment ago (for programs that need a number in their config).
///
/// # Panics
///
/// When no loopback port can be bound.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed and reaped on drop, with the folder of its files removed.
#[derive(Debug)]
pub struct Guard {
    name: &'static str,
    child: Child,
    dir: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Guard {
    /// Starts `program` with `args`, its output to `dir/error.log`; `dir` is removed on drop.
    ///
    /// # Panics
    ///
    /// When the log cannot be created or the program cannot be started.
    pub fn spawn(name: &'static str, program: &Path, args: &[&str], dir: PathBuf) -> Guard {
        let log = std::fs::File::create(dir.join("error.log")).unwrap();
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        Guard { name, child, dir }
    }

    /// The process id (gone from `/proc` once the guard has dropped).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The folder of the process's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Waits until `addr` accepts a connection: at most 100 tries over about 5 s.
    ///
    /// # Panics
    ///
    /// With the process's log if it exits, or if `addr` does not accept in time.
    pub fn wait_listening(&mut self, addr: SocketAddr) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for _ in 0..100 {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                panic!("{} exited ({status}): {log}", self.name);
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
                return;
            }
            if Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} is not listening on {addr}", self.name);
    }
}

/// A fresh folder under the system's temp folder, named after `name` and this process.
///
/// # Panics
///
/// When the folder cannot be created.
pub fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("seawall-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `program` (nginx) listening on 127.0.0.1:`port` with the configuration `conf` makes
/// from its prefix folder (where its pid, log and temporary files go).
///
/// # Panics
///
/// When nginx cannot start or does not listen within about 5 s.
pub fn start_nginx_conf(program: &Path, port: u16, conf: impl FnOnce(&str) -> String) -> Guard {
    let dir = temp_dir("nginx");
    let file = dir.join("nginx.conf");
    std::fs::write(&file, conf(&dir.display().to_string())).unwrap();
    let prefix = format!("{}/", dir.display());
    let file = file.display().to_string();
    let mut g = Guard::spawn("nginx", program, &["-p", &prefix, "-c", &file], dir);
    g.wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
    g
}

/// nginx on a free port answering `return 200 "ok"` to everything: one process (no master),
/// one worker, no access log. Returns the guard and the URL.
///
/// # Panics
///
/// As [`start_nginx_conf`].
pub fn nginx_return_200(program: &Path, worker_connections: usize) -> (Guard, String) {
    let port = free_port();
    let guard = start_nginx_conf(program, port, |d| {
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
             events {{ worker_connections {worker_connections}; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n  default_type text/plain;\n\
               client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n\
               uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n\
               server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
        )
    });
    (guard, format!("http://127.0.0.1:{port}/"))
}
