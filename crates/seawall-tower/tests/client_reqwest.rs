//! `ReqwestService` (feature `reqwest`) behind `RetryLayer`, against real servers on 127.0.0.1:
//! retries carry `Request-Attempt`, responses keep their status, headers and version, a refused
//! connection is found in the error chain (and retried even for a POST), and bodies over the cap
//! fail clearly.
#![cfg(feature = "reqwest")]

mod common_client;

use std::error::Error as _;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{get, post, reply, serve};
use seawall::policy::GiveUpReason;
use seawall_tower::client::reqwest::{DEFAULT_MAX_BODY_SIZE, ReqwestError, ReqwestService};
use seawall_tower::client::{BoxError, LastOutcome, RetryLayer};
use tower::{Layer, ServiceExt};

fn service() -> ReqwestService {
    ReqwestService::new(reqwest::Client::builder().no_proxy().build().unwrap())
}

/// A loopback address nothing listens on: bound, then released.
fn closed_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// True if a refused connection is somewhere in `err`'s source chain (what the layers look for).
fn refused_in_chain(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cur = e.source();
    }
    false
}

#[tokio::test]
async fn a_503_is_retried_with_its_attempt_number_and_the_answer_is_kept_whole() {
    let seen: Arc<Mutex<Vec<http::HeaderMap>>> = Arc::default();
    let s = seen.clone();
    let router = axum::Router::new().route(
        "/",
        any(move |req: Request| {
            let n = {
                let mut g = s.lock().unwrap();
                g.push(req.headers().clone());
                g.len()
            };
            async move {
                if n == 1 {
                    reply(503, &[("retry-pushback-ms", "10".into())])
                } else {
                    http::Response::builder()
                        .status(201)
                        .header("x-served-by", "test")
                        .body(axum::body::Body::from("created"))
                        .unwrap()
                }
            }
        }),
    );
    let addr = serve(router).await;

    let resp = RetryLayer::new().layer(service()).oneshot(get(addr, "/")).await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.version(), http::Version::HTTP_11);
    assert_eq!(resp.headers()["x-served-by"], "test");
    assert_eq!(resp.body(), "created");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one failure, one retry");
    assert!(!seen[0].contains_key("request-attempt"), "a first attempt carries no number");
    assert_eq!(seen[1]["request-attempt"], "2");
}

#[tokio::test]
async fn string_and_vec_bodies_are_sent() {
    let router = axum::Router::new().route("/", any(|body: Bytes| async move { body }));
    let addr = serve(router).await;
    let uri = format!("http://{addr}/");
    let layer = RetryLayer::new();

    let req = http::Request::post(&uri).body(String::from("text")).unwrap();
    let resp = layer.layer(service()).oneshot(req).await.unwrap();
    assert_eq!(resp.body(), "text");
    let req = http::Request::put(&uri).body(b"bytes".to_vec()).unwrap();
    let resp = layer.layer(service()).oneshot(req).await.unwrap();
    assert_eq!(resp.body(), "bytes");
}

#[tokio::test]
async fn a_refused_connection_is_found_in_the_chain_and_retried_even_for_a_post() {
    let addr = closed_port();

    // The adapter alone: reqwest's error, with the operating system's below it.
    let err = service().oneshot(post(addr, "/")).await.unwrap_err();
    assert!(matches!(err, ReqwestError::Send(_)), "{err:?}");
    assert!(err.reqwest().unwrap().is_connect(), "{err:?}");
    assert!(refused_in_chain(&err), "no ConnectionRefused in the chain of {err:?}");
    let boxed: BoxError = err.into();
    assert!(refused_in_chain(&*boxed), "the chain survives boxing");

    // Behind the layer with its defaults (3 attempts): the server never saw the POST, so all
    // three attempts are sent.
    let e = RetryLayer::new().layer(service()).oneshot(post(addr, "/")).await.unwrap_err();
    assert_eq!(e.attempts(), 3, "{e}");
    assert_eq!(e.reason(), GiveUpReason::AttemptsExhausted);
    // The transport error is the give-up's source, as error reporters walk the chain.
    let last = std::error::Error::source(&e).expect("a transport error");
    assert!(matches!(last.downcast_ref::<ReqwestError>(), Some(ReqwestError::Send(_))));
    assert!(refused_in_chain(&e), "the refused connection is found through the give-up");
    assert!(matches!(e.into_last(), LastOutcome::Error(_)));
}

/// One connection on a loopback listener, answered with `body_len` bytes in 1 KiB chunks and no
/// `Content-Length` (chunked transfer encoding). A plain thread: the test's tokio has no io-util.
fn chunked_server(body_len: usize) -> std::net::SocketAddr {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        if !common_client::read_head(&mut sock) {
            return;
        }
        let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for chunk in vec![b'x'; body_len].chunks(1024) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        // The client may hang up once it has seen too much: ignore write errors.
        let _ = sock.write_all(&out);
    });
    addr
}

#[tokio::test]
async fn bodies_over_the_cap_fail_clearly() {
    assert_eq!(service().max_body_size(), DEFAULT_MAX_BODY_SIZE);
    let router = axum::Router::new()
        .route("/", any(|| async { vec![b'x'; 4096] }))
        .route("/small", any(|| async { vec![b'x'; 1024] }));
    let addr = serve(router).await;
    let capped = service().with_max_body_size(1024);

    // At the cap: fine.
    let resp = capped.clone().oneshot(get(addr, "/small")).await.unwrap();
    assert_eq!(resp.body().len(), 1024);

    // Over it, with a Content-Length: refused before the body is read.
    let err = capped.clone().oneshot(get(addr, "/")).await.unwrap_err();
    assert!(
        matches!(err, ReqwestError::BodyTooLarge { limit: 1024, status: http::StatusCode::OK }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("1024-byte cap") && msg.contains("with_max_body_size"), "{msg}");
    assert!(err.source().is_none());

    // Over it, streamed without a Content-Length: refused once the cap is passed.
    let addr = chunked_server(8 * 1024);
    let err = capped.clone().oneshot(get(addr, "/")).await.unwrap_err();
    assert!(matches!(err, ReqwestError::BodyTooLarge { limit: 1024, .. }), "{err:?}");

    // Behind the layer, the caller gets the same error back as the last outcome, after one
    // attempt: the same answer would come back.
    let addr = serve(axum::Router::new().route("/", any(|| async { vec![b'x'; 4096] }))).await;
    let e = RetryLayer::new().layer(capped).oneshot(get(addr, "/")).await.unwrap_err();
    assert_eq!((e.attempts(), e.reason()), (1, GiveUpReason::NotRetryable));
    let Some(last) = e.transport_error() else { panic!("{e:?}") };
    assert!(
        matches!(last.downcast_ref::<ReqwestError>(), Some(ReqwestError::BodyTooLarge { .. })),
        "{last:?}"
    );
}
