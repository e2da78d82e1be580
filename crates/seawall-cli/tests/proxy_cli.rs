//! `seawall proxy` as a user runs it: bad input exits 2 with a clear message; a running proxy
//! prints its addresses, forwards, applies a scheduled fault and serves /metrics; the child is
//! killed at the end of the test, also when it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn seawall() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seawall"))
}

/// Kills the child on drop, whatever the test's outcome.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    let cases: [(&[&str], &str); 8] = [
        (&["--listen", "0.0.0.0:7000", "--upstream", "127.0.0.1:5432"], "only loopback"),
        (&["--listen", "nonsense", "--upstream", "127.0.0.1:5432"], "--listen"),
        (&["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1"], "--upstream"),
        (&["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:0"], "port 0"),
        (
            &["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--fault", "boom:3"],
            "unknown kind",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "127.0.0.1:1",
                "--http",
                "--fault",
                "bandwidth:3,rate=5",
            ],
            "TCP mode only",
        ),
        (
            &["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--control", "10.1.2.3:80"],
            "--control",
        ),
        (
            &["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--control", "127.0.0.1:0"],
            "needs a bearer token",
        ),
    ];
    for (args, why) in cases {
        let out =
            seawall().arg("proxy").args(args).env_remove("SEAWALL_ADMIN_TOKEN").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {why:?} not in {err}");
    }
    // A port already taken is a clear error too.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out =
        seawall().args(["proxy", "--listen", &addr, "--upstream", "127.0.0.1:1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

#[test]
fn help_documents_the_grammar_and_the_control_api() {
    let out = seawall().args(["proxy", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for word in ["restart-cold", "bandwidth", "pct=P", "POST /faults", "GET /metrics", "Exit codes"]
    {
        assert!(help.contains(word), "{word:?} missing from --help");
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn forwards_applies_its_schedule_and_serves_metrics() {
    // Upstream: a one-thread echo of one line per connection, for at most 8 connections.
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_addr = up.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in up.incoming().take(8).flatten() {
            let mut line = String::new();
            let mut r = BufReader::new(&s);
            if r.read_line(&mut line).is_ok() {
                let _ = (&s).write_all(line.as_bytes());
            }
        }
    });
    let child = seawall()
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &up_addr,
            "--control",
            "127.0.0.1:0",
        ])
        .args(["--fault", "fail:30@1.5", "--duration", "20"])
        .env("SEAWALL_ADMIN_TOKEN", "cli-test-token-0123456789")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = Guard(child);
    let mut lines = BufReader::new(guard.0.stdout.take().unwrap()).lines();
    let listen = lines.next().unwrap().unwrap().strip_prefix("listening ").unwrap().to_string();
    let control = lines.next().unwrap().unwrap().strip_prefix("control ").unwrap().to_string();
    let echo = |msg: &str| -> std::io::Result<String> {
        let mut s = TcpStream::connect(&listen)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(msg.as_bytes())?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        Ok(line)
    };
    assert_eq!(echo("hello\n").unwrap(), "hello\n");
    // The schedule's fail starts 1.5 s after the start: wait for it (bounded), through /state.
    let mut active = false;
    for _ in 0..40 {
        if http_get(&control, "/state").contains("\"active\":true") {
            active = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(active, "the scheduled fault never became active");
    assert!(echo("refused\n").map_or(true, |l| l.is_empty()), "passed during fail");
    let metrics = http_get(&control, "/metrics");
    assert!(metrics.contains("seawall_proxy_connections_total 2"), "{metrics}");
    assert!(metrics.contains("seawall_proxy_faulted_total{fault=\"fail\"} 1"), "{metrics}");
}
