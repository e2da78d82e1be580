//! A real tonic server on 127.0.0.1 whose unary handler a test scripts, and the raw-bytes codec
//! both sides use (no protobuf needed).
#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;

#[path = "../../examples/support/raw_codec.rs"]
mod raw_codec;
pub(crate) use raw_codec::Raw;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// `grpc-previous-rpc-attempts`, if sent.
    pub(crate) previous: Option<u32>,
    /// `grpc-timeout`, if sent.
    pub(crate) timeout: Option<String>,
    /// The request message.
    pub(crate) message: Vec<u8>,
    /// When it arrived.
    pub(crate) at: std::time::Instant,
}

type Reply = Pin<Box<dyn Future<Output = Result<Vec<u8>, Status>> + Send>>;
/// The scripted handler: (the request as seen) -> the answer.
pub(crate) type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

#[derive(Clone)]
struct Echo {
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl tonic::server::UnaryService<Vec<u8>> for Echo {
    type Response = Vec<u8>;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Vec<u8>>, Status>> + Send>>;
    fn call(&mut self, req: tonic::Request<Vec<u8>>) -> Self::Future {
        let md = req.metadata();
        let seen = Seen {
            previous: md
                .get("grpc-previous-rpc-attempts")
                .map(|v| v.to_str().unwrap().parse().unwrap()),
            timeout: md.get("grpc-timeout").map(|v| v.to_str().unwrap().to_owned()),
            message: req.get_ref().clone(),
            at: std::time::Instant::now(),
        };
        self.seen.lock().unwrap().push(seen.clone());
        let reply = (self.handler)(&seen);
        Box::pin(async move { reply.await.map(tonic::Response::new) })
    }
}

#[derive(Clone)]
struct EchoServer(Echo);

impl tonic::server::NamedService for EchoServer {
    const NAME: &'static str = "demo.Echo";
}

impl tower::Service<http::Request<Body>> for EchoServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let echo = self.0.clone();
        Box::pin(async move { Ok(tonic::server::Grpc::new(Raw).unary(echo, req).await) })
    }
}

/// A running server: its address and what it saw.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Serves `demo.Echo` on an ephemeral 127.0.0.1 port, every method answered by `handler`.
    pub(crate) async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let svc = EchoServer(Echo { handler: Arc::new(handler), seen: seen.clone() });
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        Server { addr, seen, task }
    }

    /// A lazily connecting channel to it.
    pub(crate) fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Endpoint::try_from(format!("http://{}", self.addr))
            .unwrap()
            .connect_lazy()
    }

    /// The `grpc-previous-rpc-attempts` of each request, in arrival order.
    pub(crate) fn previous(&self) -> Vec<Option<u32>> {
        self.seen.lock().unwrap().iter().map(|s| s.previous).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A ready reply.
pub(crate) fn reply(r: Result<Vec<u8>, Status>) -> Reply {
    Box::pin(std::future::ready(r))
}

/// A status carrying `grpc-retry-pushback-ms: value`.
pub(crate) fn with_pushback(code: tonic::Code, value: &str) -> Status {
    let mut md = tonic::metadata::MetadataMap::new();
    md.insert("grpc-retry-pushback-ms", value.parse().unwrap());
    Status::with_metadata(code, "pushback", md)
}
