//! `seawall escape --apply` sends the admin token (`--admin-token-file`, `$SEAWALL_ADMIN_TOKEN`)
//! as `Authorization: Bearer` with every admission POST, and refuses a malformed token (exit 2)
//! before contacting anything. The admin endpoint is a loopback listener of this test.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

const TOKEN: &str = "lab-token-0123456789abcdef";

/// A loopback HTTP endpoint answering 200 to everything; sends each request's line and
/// `Authorization` value (or `-`) on the channel, until a request for `/stop`.
fn endpoint() -> (String, mpsc::Receiver<(String, String)>, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        // Bounded: a run makes a handful of requests.
        for conn in listener.incoming().take(64) {
            let Ok(mut conn) = conn else { break };
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let (mut first, mut auth) = (String::new(), "-".to_string());
            let _ = r.read_line(&mut first);
            loop {
                let mut l = String::new();
                if r.read_line(&mut l).unwrap_or(0) == 0 || l.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':')
                    && k.eq_ignore_ascii_case("authorization")
                {
                    auth = v.trim().to_string();
                }
            }
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
            if first.contains("/stop") {
                break;
            }
            let _ = tx.send((first.trim().to_string(), auth));
        }
    });
    (url, rx, t)
}

fn stop(url: &str, t: std::thread::JoinHandle<()>) {
    let mut s = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    let _ = s.write_all(b"GET /stop HTTP/1.1\r\nhost: x\r\n\r\n");
    t.join().unwrap();
}

fn escape(url: &str, extra: &[&str], env: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seawall"));
    cmd.args(["escape", "--apply", "--hold", "0", "--max-wait", "0", "--admission-url"])
        .arg(format!("{url}/admin/admission"))
        .args(extra)
        .env_remove("SEAWALL_ADMIN_TOKEN");
    if let Some(t) = env {
        cmd.env("SEAWALL_ADMIN_TOKEN", t);
    }
    cmd.output().unwrap()
}

#[test]
fn the_token_goes_with_every_admin_post() {
    let dir = std::env::temp_dir().join(format!("seawall-escape-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("admin-token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    for (extra, env) in
        [(vec!["--admin-token-file", file.to_str().unwrap()], None), (vec![], Some(TOKEN))]
    {
        let (url, rx, t) = endpoint();
        let out = escape(&url, &extra, env);
        stop(&url, t);
        let seen: Vec<_> = rx.try_iter().collect();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // The cut and one POST per ramp stage.
        assert!(seen.len() >= 2, "{seen:?}");
        for (line, auth) in &seen {
            assert!(line.starts_with("POST /admin/admission?percent="), "{line}");
            assert_eq!(auth, &format!("Bearer {TOKEN}"), "{line}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_malformed_token_is_refused_before_anything_is_contacted() {
    let (url, rx, t) = endpoint();
    let out = escape(&url, &["--admin-token", "short"], None);
    stop(&url, t);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than 16"), "{out:?}");
    assert_eq!(rx.try_iter().count(), 0);
}
