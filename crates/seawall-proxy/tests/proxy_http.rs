//! `seawall proxy --http` against an in-test hyper server on 127.0.0.1 (HTTP/1.1 and HTTP/2):
//! 503 and gRPC UNAVAILABLE during `fail`, attempt headers counted, identical requests in flight
//! counted, HTTP/2 forwarded as HTTP/2, and the control API.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use seawall::time::SystemClock;
use seawall_proxy::{AdminAuth, AdminToken, Mode, Proxy, ProxyConfig};

const TOKEN: &str = "proxy-control-token-0123";

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The upstream: answers with the protocol version it saw; `/slow` takes 500 ms.
async fn upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((s, _)) = l.accept().await {
            conns.spawn(async move {
                let svc = service_fn(|req: Request<Incoming>| async move {
                    let version = format!("{:?}", req.version());
                    if req.uri().path() == "/slow" {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    let body =
                        req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("x-version", version)
                            .body(Full::new(body))
                            .unwrap(),
                    )
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (addr, task)
}

struct Setup {
    proxy: Proxy,
    _upstream: tokio::task::JoinHandle<()>,
    h1: HttpClient,
    h2: HttpClient,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self._upstream.abort();
    }
}

async fn setup() -> Setup {
    let (addr, task) = upstream().await;
    let mut config = ProxyConfig::new("127.0.0.1:0", &addr.to_string(), Mode::Http).unwrap();
    config.control = Some("127.0.0.1:0".parse().unwrap());
    config.control_auth = Some(AdminAuth::Bearer(AdminToken::new(TOKEN).unwrap()));
    let proxy = Proxy::start(config, Arc::new(SystemClock)).await.unwrap();
    Setup {
        proxy,
        _upstream: task,
        h1: Client::builder(TokioExecutor::new()).build_http(),
        h2: Client::builder(TokioExecutor::new()).http2_only(true).build_http(),
    }
}

impl Setup {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy.listen_addr())
    }

    fn control(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy.control_addr().unwrap())
    }
}

async fn send(c: &HttpClient, req: Request<Full<Bytes>>) -> (StatusCode, http::HeaderMap, String) {
    let r = tokio::time::timeout(Duration::from_secs(10), c.request(req))
        .await
        .expect("bounded")
        .expect("answered");
    let (parts, body) = r.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url).body(Full::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_both_protocols_and_counts_attempts() {
    let s = setup().await;
    let (st, h, _) = send(&s.h1, get(&s.url("/a"))).await;
    assert_eq!((st, h["x-version"].to_str().unwrap()), (StatusCode::OK, "HTTP/1.1"));
    let mut req = get(&s.url("/a"));
    *req.version_mut() = Version::HTTP_2;
    let (st, h, _) = send(&s.h2, req).await;
    assert_eq!((st, h["x-version"].to_str().unwrap()), (StatusCode::OK, "HTTP/2.0"));
    for (name, value) in [
        ("request-attempt", "2"),
        ("request-attempt", "3"),
        ("grpc-previous-rpc-attempts", "2"),
        ("request-attempt", "junk"),
    ] {
        let req = Request::get(s.url("/b")).header(name, value).body(Full::default()).unwrap();
        assert_eq!(send(&s.h1, req).await.0, StatusCode::OK);
    }
    let (_, _, metrics) = send(&s.h1, get(&s.control("/metrics"))).await;
    for line in [
        "seawall_proxy_requests_total 6\n",
        "seawall_proxy_attempts_total{attempt=\"1\"} 3\n",
        "seawall_proxy_attempts_total{attempt=\"2\"} 1\n",
        "seawall_proxy_attempts_total{attempt=\"3\"} 2\n",
    ] {
        assert!(metrics.contains(line), "{line:?} missing in\n{metrics}");
    }
}

/// A control request that changes the faults, with the bearer token.
fn authorized(req: http::request::Builder) -> http::request::Builder {
    req.header("authorization", format!("Bearer {TOKEN}"))
}

/// Changing the faults takes the token; reading does not. Mutation checked: dropping the
/// `refused` check in `post_fault` lets the tokenless and wrong-token posts through (201).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_api_changes_faults_only_with_the_token() {
    let s = setup().await;
    for auth in [None, Some("Bearer guess-guess-guess-guess"), Some("Basic abc")] {
        let mut post = Request::post(s.control("/faults"));
        if let Some(a) = auth {
            post = post.header("authorization", a);
        }
        let (st, h, _) = send(&s.h1, post.body(Full::new(Bytes::from("fail:60"))).unwrap()).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert!(h.contains_key("www-authenticate"));
        let del = Request::delete(s.control("/faults")).body(Full::default()).unwrap();
        assert_eq!(send(&s.h1, del).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(send(&s.h1, get(&s.url("/a"))).await.0, StatusCode::OK, "no fault was added");
    assert_eq!(send(&s.h1, get(&s.control("/state"))).await.0, StatusCode::OK);
    let post = authorized(Request::post(s.control("/faults")));
    assert_eq!(
        send(&s.h1, post.body(Full::new(Bytes::from("fail:60"))).unwrap()).await.0,
        StatusCode::CREATED
    );
}

/// A control address without a decision on authentication is refused at configuration.
#[test]
fn a_control_address_needs_an_auth_decision() {
    let mut config = ProxyConfig::new("127.0.0.1:0", "127.0.0.1:9", Mode::Http).unwrap();
    config.control = Some("127.0.0.1:0".parse().unwrap());
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("bearer token"), "{e}");
    config.control_auth = Some(AdminAuth::unauthenticated());
    config.validate().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_answers_503_and_grpc_unavailable_via_the_control_api() {
    let s = setup().await;
    let post = authorized(Request::post(s.control("/faults")))
        .body(Full::new(Bytes::from("fail:60")))
        .unwrap();
    assert_eq!(send(&s.h1, post).await.0, StatusCode::CREATED);
    assert_eq!(send(&s.h1, get(&s.url("/a"))).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let mut grpc = Request::post(s.url("/pkg.Svc/Call"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap();
    *grpc.version_mut() = Version::HTTP_2;
    let (st, h, _) = send(&s.h2, grpc).await;
    assert_eq!((st, h["grpc-status"].to_str().unwrap()), (StatusCode::OK, "14"));
    let bad = authorized(Request::post(s.control("/faults")))
        .body(Full::new(Bytes::from("bandwidth:5,rate=9")))
        .unwrap();
    let (st, _, why) = send(&s.h1, bad).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(why.contains("TCP mode only"), "{why}");
    let (_, _, state) = send(&s.h1, get(&s.control("/state"))).await;
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["faults"][0]["active"], true);
    assert_eq!(state["series"][0]["faulted"], 2);
    let del = authorized(Request::delete(s.control("/faults"))).body(Full::default()).unwrap();
    assert_eq!(send(&s.h1, del).await.2, "{\"cleared\":1}");
    assert_eq!(send(&s.h1, get(&s.url("/a"))).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_requests_in_flight_are_counted_apart_from_different_ones() {
    let s = setup().await;
    let post = |body: &'static str| {
        Request::post(s.url("/slow")).body(Full::new(Bytes::from(body))).unwrap()
    };
    let mut tasks = tokio::task::JoinSet::new();
    for body in ["same", "same", "same", "same", "same", "other"] {
        let (c, req) = (s.h1.clone(), post(body));
        tasks.spawn(async move { send(&c, req).await.0 });
    }
    // Meanwhile, while the six are held upstream, the gauge shows the five copies.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(s.proxy.stats().identical_in_flight(), 5);
    while let Some(st) = tasks.join_next().await {
        assert_eq!(st.unwrap(), StatusCode::OK);
    }
    assert_eq!(s.proxy.stats().identical_in_flight(), 0);
    assert!(s.proxy.stats().prometheus().contains("seawall_proxy_identical_in_flight_peak 5\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_delays_and_hang_drops_at_its_bound() {
    let s = setup().await;
    s.proxy.add_fault("slow:60,latency=300".parse().unwrap()).unwrap();
    let t = std::time::Instant::now();
    assert_eq!(send(&s.h1, get(&s.url("/a"))).await.0, StatusCode::OK);
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    s.proxy.clear_faults();
    s.proxy.add_fault("hang:60,max=0.5".parse().unwrap()).unwrap();
    let t = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), s.h1.request(get(&s.url("/a"))))
        .await
        .expect("bounded");
    assert!(r.is_err(), "the held request ends with a dropped connection");
    assert!(t.elapsed() >= Duration::from_millis(450), "{:?}", t.elapsed());
}

/// The /metrics page is valid Prometheus text by Prometheus's own checker (`promtool check
/// metrics`, which also lints names and help).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool"]
async fn metrics_pass_promtool() {
    use std::io::Write;
    let promtool = seawall_testkit::require_external("promtool");
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let s = setup().await;
    let req =
        Request::get(s.url("/a")).header("request-attempt", "2").body(Full::default()).unwrap();
    send(&s.h1, req).await;
    let (_, _, metrics) = send(&s.h1, get(&s.control("/metrics"))).await;
    child.stdin.take().unwrap().write_all(metrics.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "promtool: {said}\n{metrics}");
}

/// `restart-cold` closes the connections a client holds open, as a restarting server does,
/// instead of answering pooled keep-alive connections 503 (which a pooled client would take
/// for a plain `fail`); counters HTTP mode does not measure are absent, and a delayed request
/// counts as touched by `slow`. Mutation checked: without the `restarts` select in the accept
/// loop the connection stays open (the read times out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_cold_closes_open_connections_and_unmeasured_counters_are_absent() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = setup().await;
    let mut conn = tokio::net::TcpStream::connect(s.proxy.listen_addr()).await.unwrap();
    let req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.write_all(req).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "keep-alive first");
    let post = authorized(Request::post(s.control("/faults")))
        .body(Full::new(Bytes::from("restart-cold:2,warmup=1")))
        .unwrap();
    assert_eq!(send(&s.h1, post).await.0, StatusCode::CREATED);
    let closed = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the open connection was closed: {closed:?}");
    // The control listener stays up; the data listener refuses until the restart is over.
    assert!(tokio::net::TcpStream::connect(s.proxy.listen_addr()).await.is_err());
    let (_, _, metrics) = send(&s.h1, get(&s.control("/metrics"))).await;
    assert!(!metrics.contains("seawall_proxy_bytes_total"), "{metrics}");
    assert!(metrics.contains("seawall_proxy_faulted_total{fault=\"refuse\"} 1"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_request_counts_as_touched_by_slow() {
    let s = setup().await;
    let post = authorized(Request::post(s.control("/faults")))
        .body(Full::new(Bytes::from("slow:60,latency=10")))
        .unwrap();
    assert_eq!(send(&s.h1, post).await.0, StatusCode::CREATED);
    assert_eq!(send(&s.h1, get(&s.url("/a"))).await.0, StatusCode::OK);
    let (_, _, metrics) = send(&s.h1, get(&s.control("/metrics"))).await;
    assert!(metrics.contains("seawall_proxy_faulted_total{fault=\"slow\"} 1"), "{metrics}");
}
