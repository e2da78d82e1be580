//! `seawall detect --scrape` end to end: the binary scrapes two tiny HTTP servers on 127.0.0.1
//! (edge and dependency) whose pages advance one step per scrape; a storm starts at the tenth.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const STORM_FROM: u64 = 10;

fn page(path: &str, k: u64) -> String {
    let calm = k.min(STORM_FROM - 1);
    let storm = k.saturating_sub(STORM_FROM - 1);
    match path {
        "/edge" => format!(
            "seawall_server_throughput_total {}\nseawall_server_goodput_total {}\n\
             seawall_client_call_started_total {}\n\
             seawall_client_attempt_started_total{{attempt=\"1\"}} {}\n\
             seawall_client_attempt_started_total{{attempt=\"2\"}} {}\n\
             seawall_client_retry_overflow_total 0\n",
            100 * k,
            100 * calm,
            100 * k,
            100 * k,
            300 * storm
        ),
        _ => format!(
            "seawall_server_throughput_total {}\nseawall_server_oldest_queued_seconds {}\n",
            100 * calm + 400 * storm,
            if storm > 0 { 1.5 } else { 0.0 }
        ),
    }
}

/// A one-thread HTTP/1.1 server on 127.0.0.1 counting scrapes per path; answers `limit`
/// requests, then stops (so the test cannot leave it running).
fn serve(limit: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let counts: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(limit) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let k = counts[usize::from(path != "/edge")].fetch_add(1, Ordering::SeqCst);
            let body = page(&path, k);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

fn seawall(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seawall")).args(args).output().unwrap()
}

/// `seawall detect` scraping a fresh storm server's edge and dependency every 50 ms, learning
/// for 0.3 s, for `intervals` intervals.
fn detect_storm(intervals: &str, extra: &[&str]) -> std::process::Output {
    let base = serve(100);
    let (edge, dep) = (format!("{base}/edge"), format!("{base}/dep"));
    let mut args = vec!["detect", "--scrape", &edge, &dep, "--interval", "0.05", "--warmup", "0.3"];
    args.extend(["--max-intervals", intervals]);
    args.extend(extra);
    seawall(&args)
}

#[test]
fn json_verdicts_call_the_storm_and_stop_after_max_intervals() {
    let out = detect_storm("14", &["--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 14, "one verdict per interval, bounded");
    let kinds: Vec<&str> = lines.iter().map(|l| l["verdict"].as_str().unwrap()).collect();
    assert!(kinds[..9].iter().all(|k| ["learning", "healthy"].contains(k)), "{kinds:?}");
    assert!(kinds[9..].iter().all(|k| *k == "retry_storm"), "{kinds:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["dependency_to_edge"], 4.0);
    assert_eq!(last["targets"][0]["attempts_per_call"], 4.0);
    assert_eq!(last["queue_age_s"], 1.5);
    assert_eq!(last["goodput"], 0.0);
}

#[test]
fn text_lines_show_the_evidence() {
    let out = detect_storm("12", &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("retry_storm") && text.contains("edge flat"), "{text}");
    assert!(text.contains("attempts/call #1:4.00"), "{text}");
}

#[test]
fn unreachable_target_is_exit_2_with_the_url() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let out = seawall(&["detect", "--scrape", &url, "--max-intervals", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&url));
    let out = seawall(&["detect", "--scrape", "https://127.0.0.1:1/", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
}
