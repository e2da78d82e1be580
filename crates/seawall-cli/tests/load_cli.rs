//! `seawall load` as a user runs it: bad input exits 2 with a message naming the flag; a run
//! against a loopback server prints the table, writes results.json (and prints it with --json).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn seawall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).arg("load").args(args).output().unwrap()
}

/// A keep-alive HTTP/1.1 server answering 200 "ok", stopped (accept loop and all) on drop.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

fn answer(s: TcpStream) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s);
    for _ in 0..100_000 {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        r.by_ref().take(len as u64).read_to_end(&mut Vec::new())?;
        w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")?;
    }
    Ok(())
}

impl Server {
    fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(s) = s {
                    std::thread::spawn(move || answer(s));
                }
            }
        });
        Self { addr, stop }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("seawall-load-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn bad_input_exits_2_and_says_why() {
    let ok = "http://127.0.0.1:9/";
    for (args, says) in [
        (vec!["http://10.1.2.3/", "--rate", "5"], "not a loopback address"),
        (vec!["ftp://127.0.0.1/", "--rate", "5"], "http only"),
        (vec!["not a url", "--rate", "5"], "URL"),
        (vec![ok], "--rate RPS is required"),
        (vec![ok, "--rate", "abc"], "invalid value"),
        (vec![ok, "--rate=-3"], "rate"),
        (vec![ok, "--rate", "-10"], "rate"),
        (vec![ok, "--rate", "5", "--deadline-ms", "-1"], "--deadline-ms"),
        (vec![ok, "--rate", "5", "--duration", "2h"], "not a duration"),
        (vec![ok, "--rate", "5", "--duration", "601"], "(0, 600]"),
        (vec![ok, "--ramp", "10s"], "DURATION:RATE"),
        (vec![ok, "--ramp", "1s:10", "--duration", "1"], "exclude each other"),
        (vec![ok, "--rate", "5", "-H", "nocolon"], "--header \"nocolon\""),
        (vec![ok, "--rate", "5", "-H", "Request-Timeout-Ms: 9"], "set by the generator"),
        (vec![ok, "--rate", "5", "--method", "GE T"], "--method"),
        (vec![ok, "--rate", "5", "--deadline-ms", "0"], "--deadline-ms"),
        (vec![ok, "--rate", "5", "--max-in-flight", "0"], "--max-in-flight"),
        (vec![ok, "--rate", "5", "--body", "@/nonexistent/body"], "--body @/nonexistent/body"),
    ] {
        let out = seawall(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Nothing listening at the target: the run is refused before it starts, naming the address
/// and the OS error, instead of counting every request in a "connect" column and exiting 0.
#[test]
fn an_unreachable_target_fails_the_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tmp("unreachable");
    let url = format!("http://127.0.0.1:{port}/");
    let out = seawall(&[&url, "--rate", "20", "--duration", "1s", "--out", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot connect to 127.0.0.1:{port}")), "{err}");
    assert!(!dir.join("results.json").exists(), "no results for a run that never started");
}

#[test]
fn a_run_prints_the_table_and_writes_the_shared_results() {
    let srv = Server::start();
    let dir = tmp("run");
    let url = format!("http://{}/x", srv.addr);
    let body = dir.with_extension("body");
    std::fs::write(&body, "payload").unwrap();
    let at_body = format!("@{}", body.display());
    let out = seawall(&[
        &url,
        "--rate",
        "50",
        "--duration",
        "2s",
        "--method",
        "PUT",
        "--body",
        &at_body,
        "-H",
        "X-A: b",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, stderr) =
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("p99ms") && stderr.contains(&format!("PUT {url}")), "{stderr}");
    assert!(!stderr.contains('\r'), "no progress when stderr is not a terminal: {stderr:?}");
    let written = std::fs::read_to_string(dir.join("results.json")).unwrap();
    assert_eq!(written, stdout, "--json prints results.json");
    let r: seawall_report::Results = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r.runs[0].series.edge_rps, vec![50.0, 50.0]);
    assert_eq!(r.runs[0].series.goodput_rps, vec![50.0, 50.0]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["load"]["totals"]["good"], 100);
    assert!(v["load"]["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    // From the send the latency is the target's own: never above the one from the schedule.
    let (sched, sent) = (&v["load"]["latency_ms"], &v["load"]["latency_from_send_ms"]);
    assert_eq!(sent["count"], 100);
    assert!(sent["max"].as_f64().unwrap() <= sched["max"].as_f64().unwrap(), "{sent} {sched}");
    assert!(stderr.contains("latency from the send"), "{stderr}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Latency over the run") && html.contains("<td>from the send</td>"));
    assert_eq!(html.matches("<tr><td>").count(), 2 + 2 + 1, "latency, one row a second, all");
    // A load report: its own charts, none of the simulator's, and no recovery verdict.
    for chart in ["Errors, by kind", "Latency from the send", "own lag behind its schedule"] {
        assert!(html.contains(chart), "{chart}");
    }
    assert!(html.contains("not judged: no fault was injected"), "{html}");
    for sim in ["Amplification", "recovered", "stays down", "degraded"] {
        assert!(!html.contains(sim), "{sim} in the load report");
    }
    assert_eq!(html.matches("<svg viewBox").count(), 5, "five charts");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&body);
}
