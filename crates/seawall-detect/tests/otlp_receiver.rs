//! The OTLP/HTTP receiver under hostile senders, on loopback: clear refusals and bounded
//! memory for a 100 MB body (declared and undeclared), too many spans in one body, a slow
//! sender, a full buffer, the wrong content type and a body that is not OTLP; a real body is
//! accepted and its spans kept.
#![cfg(feature = "traces")]

use std::time::Duration;

use seawall_detect::traces::Limits;
use seawall_detect::traces::receiver::{Receiver, ReceiverOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `n` spans of one trace in OTLP JSON.
fn body(n: usize) -> String {
    let spans: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"{i:016x}","name":"GET","kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000100000000"}}"#
            )
        })
        .collect();
    format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#, spans.join(","))
}

/// Sends `head` then `body` (in `chunk`-byte writes `gap` apart) and returns the status code.
async fn post(r: &Receiver, head: &str, body: &[u8], chunk: usize, gap: Duration) -> u16 {
    let mut s = TcpStream::connect(r.local_addr()).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    for c in body.chunks(chunk.max(1)) {
        if s.write_all(c).await.is_err() {
            break; // the receiver answered and closed: read its answer
        }
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no answer: {text:?}"))
}

fn head(len: Option<usize>, ct: &str) -> String {
    match len {
        Some(n) => format!(
            "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {ct}\r\nContent-Length: {n}\r\n\r\n"
        ),
        None => format!(
            "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {ct}\r\nTransfer-Encoding: chunked\r\n\r\n"
        ),
    }
}

fn chunked(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in data.chunks(1 << 20) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

async fn receiver(options: ReceiverOptions) -> Receiver {
    Receiver::bind("127.0.0.1:0".parse().unwrap(), options).await.unwrap()
}

#[tokio::test]
async fn a_real_body_is_kept_and_hostile_ones_are_refused_clearly() {
    let r = receiver(ReceiverOptions::default()).await;
    let ok = body(10_000);
    assert_eq!(
        post(&r, &head(Some(ok.len()), "application/json"), ok.as_bytes(), 1 << 16, Duration::ZERO)
            .await,
        200
    );
    assert_eq!(r.drain().len(), 10_000, "10,000 spans in one request are kept");

    // A declared 100 MB body: refused before it is read.
    assert_eq!(
        post(&r, &head(Some(100 << 20), "application/x-protobuf"), b"", 1, Duration::ZERO).await,
        413
    );
    // 100 MB sent chunked without a length: refused at the 16 MiB limit, never held whole.
    let big = chunked(&vec![b' '; 100 << 20]);
    assert_eq!(post(&r, &head(None, "application/json"), &big, 1 << 20, Duration::ZERO).await, 413);
    // Not OTLP, and the wrong media type.
    assert_eq!(
        post(
            &r,
            &head(Some(5), "application/x-protobuf"),
            b"\xff\xff\xff\xff\xff",
            5,
            Duration::ZERO
        )
        .await,
        400
    );
    assert_eq!(post(&r, &head(Some(2), "text/plain"), b"{}", 2, Duration::ZERO).await, 415);
    let stats = r.stats();
    assert_eq!((stats.accepted, stats.refused), (1, 4), "{stats:?}");
    assert!(r.drain().is_empty(), "nothing of the refused bodies is kept");
}

#[tokio::test]
async fn too_many_spans_a_slow_sender_and_a_full_buffer_are_refused() {
    let r = receiver(ReceiverOptions {
        limits: Limits { max_bytes: 16 << 20, max_spans: 5_000 },
        body_timeout: Duration::from_millis(300),
        max_buffered: 12_000,
        ..ReceiverOptions::default()
    })
    .await;
    let many = body(10_000);
    assert_eq!(
        post(
            &r,
            &head(Some(many.len()), "application/json"),
            many.as_bytes(),
            1 << 16,
            Duration::ZERO
        )
        .await,
        413
    );
    // A slow sender: 1 KB declared, a byte every 100 ms, against a 300 ms body timeout.
    let slow = body(3);
    assert_eq!(
        post(
            &r,
            &head(Some(slow.len()), "application/json"),
            slow.as_bytes(),
            1,
            Duration::from_millis(100)
        )
        .await,
        408
    );
    // The buffer: 4,000 + 4,000 + 4,000 spans fit in 12,000; the next body is told to retry.
    let some = body(4_000);
    for _ in 0..3 {
        assert_eq!(
            post(
                &r,
                &head(Some(some.len()), "application/json"),
                some.as_bytes(),
                1 << 16,
                Duration::ZERO
            )
            .await,
            200
        );
    }
    assert_eq!(
        post(
            &r,
            &head(Some(some.len()), "application/json"),
            some.as_bytes(),
            1 << 16,
            Duration::ZERO
        )
        .await,
        503
    );
    assert_eq!(r.drain().len(), 12_000);
    // Once drained, there is room again.
    assert_eq!(
        post(
            &r,
            &head(Some(some.len()), "application/json"),
            some.as_bytes(),
            1 << 16,
            Duration::ZERO
        )
        .await,
        200
    );
}
