//! Shared by the server benches: loopback servers and load generators (not a bench itself).
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// The runtime every server bench runs in: two worker threads, timers and I/O on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

pub async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// Serves one tower service (a middleware stack around a whole router): every connection gets a
/// clone of `svc`, so state the stack holds (a semaphore) is shared by all of them.
pub async fn serve_service<S>(svc: S) -> SocketAddr
where
    S: tower::Service<
            Request<axum::body::Body>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    use axum::ServiceExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, svc.into_make_service()).await;
    });
    addr
}

/// The server configuration a performance-minded user runs, shaped like nginx's: `cores`
/// threads, each with its own current-thread tokio runtime and its own listener on one shared
/// port (`SO_REUSEPORT`: the kernel spreads connections over the listeners, as nginx's
/// `reuseport` does), serving HTTP/1 only (hyper's `http1::Builder`, no protocol sniffing) with
/// `TCP_NODELAY`, every connection a clone of `svc`. The threads, named `{name}-{i}` (so a
/// profiler tells the servers apart), run until the process exits.
pub fn serve_http1_per_core<S>(name: &str, cores: usize, svc: S) -> SocketAddr
where
    S: tower::Service<
            Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let bind = |addr: SocketAddr| {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_reuseport(true).expect("SO_REUSEPORT");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket.bind(addr).expect("bind loopback");
        socket
    };
    let first = bind(SocketAddr::from(([127, 0, 0, 1], 0)));
    let addr = first.local_addr().expect("addr");
    let mut sockets = vec![first];
    sockets.extend((1..cores).map(|_| bind(addr)));
    for (i, socket) in sockets.into_iter().enumerate() {
        let svc = svc.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-{i}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    let listener = socket.listen(1024).expect("listen");
                    let _ = ready_tx.send(());
                    loop {
                        let Ok((stream, _)) = listener.accept().await else { continue };
                        let _ = stream.set_nodelay(true);
                        let svc = hyper_util::service::TowerToHyperService::new(svc.clone());
                        tokio::spawn(async move {
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                });
            })
            .expect("spawn server thread");
        ready_rx.recv().expect("server thread listening");
    }
    addr
}

fn get(addr: SocketAddr, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .body(Empty::new())
        .expect("request")
}

/// Closed loop: `conns` keep-alive connections each sending `GET path` back to back for `run`.
/// Returns (responses per second, count of responses with `want` status).
pub async fn closed_loop(
    addr: SocketAddr,
    path: &'static str,
    conns: usize,
    run: Duration,
    want: StatusCode,
) -> (f64, u64) {
    let total = Arc::new(AtomicU64::new(0));
    let matching = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (total, matching) = (total.clone(), matching.clone());
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            while start.elapsed() < run {
                let Ok(res) = tx.send_request(get(addr, path)).await else { break };
                let status = res.status();
                let _ = res.into_body().collect().await;
                total.fetch_add(1, Ordering::Relaxed);
                if status == want {
                    matching.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    (
        total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64(),
        matching.load(Ordering::Relaxed),
    )
}

/// What an open-loop run saw.
#[derive(Debug, Clone, Copy)]
pub struct OpenLoop {
    /// Successes answered within the deadline, per second of offered load.
    pub goodput: f64,
    /// Requests sent.
    pub sent: u64,
    /// Requests answered `503` (shed by the server).
    pub shed: u64,
}

/// Open loop at `rate`/s for `run`, one connection per request (a caller gives up after 1 s).
pub async fn open_loop_goodput(
    addr: SocketAddr,
    path: &'static str,
    rate: f64,
    run: Duration,
    deadline: Duration,
) -> OpenLoop {
    let good = Arc::new(AtomicU64::new(0));
    let shed = Arc::new(AtomicU64::new(0));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..(rate * run.as_secs_f64()) as usize {
        tick.tick().await;
        let (good, shed) = (good.clone(), shed.clone());
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let once = async {
                let stream = TcpStream::connect(addr).await.ok()?;
                let (mut tx, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.ok()?;
                tokio::spawn(conn);
                let res = tx.send_request(get(addr, path)).await.ok()?;
                let status = res.status();
                res.into_body().collect().await.ok()?;
                Some(status)
            };
            let got = tokio::time::timeout(Duration::from_secs(1), once).await.ok().flatten();
            if got == Some(StatusCode::OK) && sent.elapsed() <= deadline {
                good.fetch_add(1, Ordering::Relaxed);
            }
            if got == Some(StatusCode::SERVICE_UNAVAILABLE) {
                shed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let offered_for = start.elapsed();
    let sent = tasks.len() as u64;
    for t in tasks {
        let _ = t.await;
    }
    OpenLoop {
        goodput: good.load(Ordering::Relaxed) as f64 / offered_for.as_secs_f64(),
        sent,
        shed: shed.load(Ordering::Relaxed),
    }
}
