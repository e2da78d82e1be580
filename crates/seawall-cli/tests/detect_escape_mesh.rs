//! `seawall escape --metrics istio|envoy`: the mesh's own switches. Istio: VirtualService
//! patches as kubectl commands (dry run), attempts 0 then back one at a time. Envoy: with
//! `--apply`, `POST /runtime_modify?upstream.use_retry=N` reaches a real admin-like listener on
//! loopback in ramp order. Without a reachable target the command says what it would have done
//! and exits 2.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn seawall(args: &[&str], path: Option<&str>) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_seawall"));
    c.args(args);
    if let Some(p) = path {
        c.env("PATH", p);
    }
    let out = c.output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn istio_dry_run_prints_the_kubectl_patches() {
    let (code, t) = seawall(
        &[
            "escape",
            "--metrics",
            "istio",
            "--virtual-service",
            "reviews",
            "--namespace",
            "shop",
            "--route",
            "0",
            "--route",
            "2",
        ],
        None,
    );
    assert_eq!(code, Some(0), "{t}");
    for attempts in 0..=2 {
        for route in [0, 2] {
            let want = format!(
                r#"kubectl -n shop patch virtualservice reviews --type=json -p '[{{"op":"add","path":"/spec/http/{route}/retries","value":{{"attempts":{attempts}}}}}]'"#
            );
            assert!(t.contains(&want), "missing {want}\n{t}");
        }
    }
    assert!(t.find("\"attempts\":0").unwrap() < t.find("\"attempts\":1").unwrap(), "{t}");
    assert!(t.contains("DRY RUN") && t.contains("nothing was changed"), "{t}");
    // Applying without kubectl: the failure and every change not made.
    let (code, t) = seawall(
        &["escape", "--metrics", "istio", "--virtual-service", "reviews", "--apply", "--hold", "0"],
        Some("/nonexistent"),
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("cannot run kubectl") && t.contains("would have been done"), "{t}");
    let (code, _) = seawall(&["escape", "--metrics", "istio"], None);
    assert_eq!(code, Some(2));
}

#[test]
fn envoy_apply_posts_the_runtime_ramp_and_unreachable_says_what_it_would_do() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(5) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut h = String::new();
            while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                h.clear();
            }
            log.lock().unwrap().push(line.trim().to_string());
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nOK\n"
            );
        }
    });
    let admin = format!("http://{addr}");
    let (code, t) = seawall(
        &["escape", "--metrics", "envoy", "--envoy-admin", &admin, "--apply", "--hold", "0"],
        None,
    );
    assert_eq!(code, Some(0), "{t}");
    let seen = seen.lock().unwrap().clone();
    let want: Vec<String> = [0, 10, 25, 50, 100]
        .iter()
        .map(|p| format!("POST /runtime_modify?upstream.use_retry={p} HTTP/1.1"))
        .collect();
    assert_eq!(seen, want);
    // Nobody listening: exit 2, naming every change that was not made.
    let gone = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let admin = format!("http://{gone}");
    let (code, t) = seawall(
        &["escape", "--metrics", "envoy", "--envoy-admin", &admin, "--apply", "--hold", "0"],
        None,
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("would have been done") && t.contains("upstream.use_retry=100"), "{t}");
    // Dry run: nothing contacted.
    let (code, t) = seawall(&["escape", "--metrics", "envoy", "--envoy-admin", &admin], None);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("curl -X POST") && t.contains("nothing was changed"), "{t}");
}
