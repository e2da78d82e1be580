//! `seawall load`'s own HTTP/1.1 client on real sockets: against nginx (chunked answers,
//! connections nginx closes after a few requests or when idle), and against a scripted server
//! that misbehaves in one way per path (a cut body, an ambiguous length, an endless head, bytes
//! nobody asked for). Every response is either counted by its status or counted as `other` with
//! its connection closed; nothing panics, nothing waits for the deadline.
//!
//! The change that turns each red:
//! - reusing an idle connection without checking that the server has not closed it
//!   (`Conn::still_idle` always true) → `nginx_…` (requests after nginx's idle timeout fail);
//! - ignoring `Connection: close` (keep_alive always true) → `a_connection_announced_…`;
//! - treating a chunked body as ended at its first chunk → `a_chunked_…`;
//! - keeping a connection with stray bytes on it → `bytes_after_…`;
//! - no bound on the head (`MAX_HEAD` unchecked) → `an_endless_head_…` (waits for the
//!   deadline).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use seawall_load::{LoadResults, LoadSpec, Schedule, Target, parse_header, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn spec(url: &str, rate: f64, secs: u64, max_in_flight: usize, headers: &[&str]) -> LoadSpec {
    LoadSpec::new(
        Target::parse(url).unwrap(),
        "GET",
        headers.iter().map(|h| parse_header(h).unwrap()).collect(),
        "",
        Schedule::constant(rate, Duration::from_secs(secs)).unwrap(),
        Duration::from_millis(2000),
        max_in_flight,
        // Lenient: a request sent late on a busy machine is still sent (the drops are not
        // what these tests are about).
        Duration::from_millis(1000),
    )
    .unwrap()
}

async fn load(url: &str, s: LoadSpec) -> LoadResults {
    let out =
        tokio::time::timeout(Duration::from_secs(30), run(&s, url, |_| {})).await.expect("bounded");
    eprintln!("{}", out.render_table());
    out
}

/// Reads one request head (the load sends GETs without a body): `false` at the end of the
/// stream.
async fn read_request(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..i + 4);
            return true;
        }
        let mut chunk = [0u8; 4096];
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What the scripted server does with the `n`-th request (1-based) on a connection: the
/// pieces it writes (each written and flushed on its own), and whether it then closes.
fn script(path: &str, n: usize) -> (Vec<Vec<u8>>, bool) {
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n".to_vec();
    match path {
        "/keepalive" => (vec![ok], false),
        // Every second answer on a connection stops after 3 of its 10 bytes.
        "/cut" if n.is_multiple_of(2) => {
            (vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec()], true)
        }
        "/cut" => (vec![ok], false),
        "/ambiguous" => {
            (vec![b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nok\n".to_vec()], false)
        }
        // Announces the close and then lingers: it answers nothing more on this connection.
        "/close" if n > 1 => (vec![], false),
        "/close" => {
            (vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nok\n".to_vec()], false)
        }
        "/stray" => (vec![b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\nJUNK".to_vec()], false),
        // Interim answers, then a chunked one with an extension and a trailer, in pieces cut
        // across the head, the chunk sizes and the data.
        "/chunked" => (
            [
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 2",
                "01 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
                "5;ext=1\r\nhel",
                "lo\r\n1",
                "0\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n",
                "\r\n",
            ]
            .map(|s| s.as_bytes().to_vec())
            .to_vec(),
            false,
        ),
        "/endless" => {
            let mut pieces = vec![b"HTTP/1.1 200 OK\r\n".to_vec()];
            pieces.extend((0..80).map(|i| format!("x-{i}: {}\r\n", "a".repeat(1000)).into_bytes()));
            (pieces, false)
        }
        _ => (vec![], true),
    }
}

/// A loopback server that answers each request on each connection by [`script`] for `path`,
/// counting the connections it accepted.
async fn scripted(path: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut n = 0;
                while read_request(&mut tcp, &mut buf).await {
                    n += 1;
                    let (pieces, close) = script(path, n);
                    for p in pieces {
                        if tcp.write_all(&p).await.is_err() || tcp.flush().await.is_err() {
                            return;
                        }
                    }
                    if close {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// 20 requests, one at a time (one connection slot), 50 ms apart, against `path`.
async fn against(path: &'static str) -> (LoadResults, usize) {
    let (addr, accepted) = scripted(path).await;
    let url = format!("http://{addr}{path}");
    let out = load(&url, spec(&url, 20.0, 1, 1, &[])).await;
    let t = &out.load.totals;
    assert_eq!((t.offered, t.sent, t.deadline, t.connect), (20, 20, 0, 0), "{t:?}");
    (out, accepted.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_carries_every_request() {
    let (out, conns) = against("/keepalive").await;
    assert_eq!((out.load.totals.good, conns), (20, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_is_counted_and_its_connection_replaced() {
    let (out, conns) = against("/cut").await;
    let t = &out.load.totals;
    assert_eq!((t.good, t.other, conns), (10, 10, 10), "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_length_is_refused() {
    let (out, conns) = against("/ambiguous").await;
    let t = &out.load.totals;
    assert_eq!((t.good, t.other, conns), (0, 20, 20), "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_announced_closing_is_not_reused() {
    let (out, conns) = against("/close").await;
    assert_eq!((out.load.totals.good, out.load.totals.other, conns), (20, 0, 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_after_an_answer_close_the_connection() {
    let (out, conns) = against("/stray").await;
    assert_eq!((out.load.totals.good, out.load.totals.other, conns), (20, 0, 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_answer_in_pieces_after_interim_ones_is_read_to_its_end() {
    let (out, conns) = against("/chunked").await;
    assert_eq!((out.load.totals.good, out.load.totals.other, conns), (20, 0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_head_is_refused_not_buffered() {
    let (out, conns) = against("/endless").await;
    let t = &out.load.totals;
    assert_eq!((t.good, t.other, conns), (0, 20, 20), "{t:?}");
    // Refused at the size bound, well before the 2 s deadline.
    assert!(out.load.latency_ms.count == 0 || out.load.latency_ms.max.unwrap() < 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_nothing_is_counted() {
    let (out, _) = against("/nothing").await;
    assert_eq!((out.load.totals.good, out.load.totals.other), (0, 20));
}

/// nginx on a free port: at most 3 requests per connection (then `Connection: close`), idle
/// connections closed after 300 ms, and gzip on the fly, which makes its answers chunked.
fn nginx() -> (seawall_testkit::Guard, String) {
    let bin = seawall_testkit::require_external("nginx");
    let port = seawall_testkit::free_port();
    let guard = seawall_testkit::start_nginx_conf(&bin, port, |d| {
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 3;\n  keepalive_timeout 300ms;\n  default_type text/plain;\n\
               gzip on;\n  gzip_min_length 1;\n  gzip_types text/plain;\n\
               client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n\
               uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n\
               server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
        )
    });
    (guard, format!("http://127.0.0.1:{port}/"))
}

/// One request by hand: nginx's answer head, as sent.
async fn raw_head(url: &str, extra: &str) -> String {
    let addr = Target::parse(url).unwrap().addr;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tcp.read_to_end(&mut resp).await.unwrap();
    let resp = String::from_utf8_lossy(&resp).into_owned();
    resp.split("\r\n\r\n").next().unwrap().to_ascii_lowercase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx"]
async fn nginx_chunked_answers_and_closed_connections_are_all_good() {
    let (_nginx, url) = nginx();
    // The answers really are chunked (gzip on the fly) when asked for gzip, and not otherwise.
    assert!(
        raw_head(&url, "Accept-Encoding: gzip\r\n").await.contains("transfer-encoding: chunked")
    );
    assert!(raw_head(&url, "").await.contains("content-length: 3"));
    // 100 requests over 4 connections: each one closed by nginx after its third answer.
    let gz = spec(&url, 100.0, 1, 4, &["Accept-Encoding: gzip"]);
    let out = load(&url, gz).await;
    let t = &out.load.totals;
    assert_eq!((t.sent, t.good, t.other), (100, 100, 0), "{t:?}");
    // Two seconds at 3 rps on one connection slot: nginx closes each idle connection 300 ms
    // after its answer, well before the next request is due; the client sees that and opens
    // a fresh one instead of writing into the closed one.
    let out = load(&url, spec(&url, 3.0, 2, 1, &[])).await;
    let t = &out.load.totals;
    assert_eq!((t.sent, t.good, t.other), (6, 6, 0), "{t:?}");
}
