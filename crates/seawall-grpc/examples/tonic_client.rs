//! A tonic channel behind seawall's `GrpcRetryLayer`: a local tonic server answers UNAVAILABLE
//! (trailers-only) to the first two attempts of each call; the layer retries them because the
//! service config's `retryPolicy` lists UNAVAILABLE (gRFC A6; no idempotency key involved),
//! with `grpc-previous-rpc-attempts` and `grpc-timeout` on the wire, and succeeds on the third.
//!
//! Run: `cargo run -p seawall-grpc --example tonic_client`

use std::convert::Infallible;
use std::task::{Context, Poll};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use seawall_grpc::{GrpcEvent, GrpcRetryLayer};
use tonic::{Status, body::Body};
use tower::ServiceBuilder;

#[path = "support/raw_codec.rs"]
mod raw_codec;
use raw_codec::Raw;

/// The unary handler: UNAVAILABLE until the third attempt, then echo.
#[derive(Debug, Clone, Copy)]
struct Echo;

impl tonic::server::UnaryService<Vec<u8>> for Echo {
    type Response = Vec<u8>;
    type Future = std::future::Ready<Result<tonic::Response<Vec<u8>>, Status>>;
    fn call(&mut self, req: tonic::Request<Vec<u8>>) -> Self::Future {
        let previous = req
            .metadata()
            .get("grpc-previous-rpc-attempts")
            .and_then(|v| v.to_str().ok()?.parse::<u32>().ok())
            .unwrap_or(0);
        let timeout =
            req.metadata().get("grpc-timeout").map(|v| v.to_str().unwrap_or("?").to_owned());
        println!("server: attempt {} (grpc-timeout {timeout:?})", previous + 1);
        std::future::ready(if previous < 2 {
            Err(Status::unavailable("warming up"))
        } else {
            Ok(tonic::Response::new(req.into_inner()))
        })
    }
}

/// The tower service tonic's server mounts (what tonic-build would generate).
#[derive(Debug, Clone, Copy)]
struct EchoServer;

impl tonic::server::NamedService for EchoServer {
    const NAME: &'static str = "demo.Echo";
}

impl tower::Service<http::Request<Body>> for EchoServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        Box::pin(async move { Ok(tonic::server::Grpc::new(Raw).unary(Echo, req).await) })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let incoming = tokio_stream_from(listener);
    tokio::spawn(
        tonic::transport::Server::builder().add_service(EchoServer).serve_with_incoming(incoming),
    );

    // The service owner's config: retry UNAVAILABLE up to 3 attempts, throttled per server.
    let layer = GrpcRetryLayer::from_json(
        r#"{
          "methodConfig": [{
            "name": [{"service": "demo.Echo"}],
            "timeout": "2s",
            "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "1s",
                            "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
          }],
          "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
        }"#,
    )?;
    let attempts = Arc::new(AtomicU32::new(0));
    let counted = attempts.clone();
    let layer = layer.with_observer(move |e| {
        if let GrpcEvent::Attempt { .. } = e {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let throttle = layer.throttle().cloned();

    let channel = tonic::transport::Endpoint::try_from(format!("http://{addr}"))?.connect_lazy();
    let svc = ServiceBuilder::new().layer(layer).service(channel);
    let mut client = tonic::client::Grpc::new(svc);
    client.ready().await.map_err(|e| e.to_string())?;
    let path = http::uri::PathAndQuery::from_static("/demo.Echo/Say");
    let reply = client.unary(tonic::Request::new(b"hello".to_vec()), path, Raw).await?;
    println!("client: {:?} after retries", String::from_utf8_lossy(reply.get_ref()));
    let attempts = attempts.load(Ordering::Relaxed);
    let tokens = throttle.map_or(f64::NAN, |t| t.tokens());
    println!("client: {attempts} attempts; throttle tokens {tokens} of 10");
    assert_eq!(attempts, 3);
    Ok(())
}

/// A `TcpListener` as the stream of connections tonic's server wants.
fn tokio_stream_from(
    listener: tokio::net::TcpListener,
) -> impl futures_core::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    struct Incoming(tokio::net::TcpListener);
    impl futures_core::Stream for Incoming {
        type Item = std::io::Result<tokio::net::TcpStream>;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Self::Item>> {
            self.0.poll_accept(cx).map(|r| Some(r.map(|(s, _)| s)))
        }
    }
    Incoming(listener)
}
