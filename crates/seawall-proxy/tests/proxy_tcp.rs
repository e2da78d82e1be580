//! `seawall proxy --tcp` with a plain echo upstream on 127.0.0.1: the proxy's own bounds
//! (connections, held queue) and the fail modes, independent of PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use seawall::time::SystemClock;
use seawall_proxy::{Limits, Mode, Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn echo() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut s, _)) = l.accept().await {
            conns.spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (addr, task)
}

async fn proxy(limits: Limits) -> (Proxy, tokio::task::JoinHandle<()>) {
    let (addr, task) = echo().await;
    let mut c = ProxyConfig::new("127.0.0.1:0", &addr.to_string(), Mode::Tcp).unwrap();
    c.limits = limits;
    (Proxy::start(c, Arc::new(SystemClock)).await.unwrap(), task)
}

/// Writes `msg` and reads it back: `Ok` if the echo came through, `Err` if the proxy cut it.
async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    s.write_all(msg).await?;
    let mut buf = vec![0; msg.len()];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await.expect("bounded")?;
    assert_eq!(buf, msg);
    Ok(())
}

/// A new connection and one round trip. The proxy's reset may arrive before `connect`
/// returns (then `connect` reports it), or after.
async fn fresh(addr: std::net::SocketAddr, msg: &[u8]) -> std::io::Result<()> {
    let mut s = TcpStream::connect(addr).await?;
    round_trip(&mut s, msg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_bound_are_reset() {
    let (p, echo) = proxy(Limits { max_connections: 2, ..Limits::default() }).await;
    let mut a = TcpStream::connect(p.listen_addr()).await.unwrap();
    let mut b = TcpStream::connect(p.listen_addr()).await.unwrap();
    round_trip(&mut a, b"a").await.unwrap();
    round_trip(&mut b, b"b").await.unwrap();
    assert!(fresh(p.listen_addr(), b"c").await.is_err());
    assert!(
        p.stats()
            .prometheus()
            .contains("seawall_proxy_rejected_total{reason=\"max_connections\"} 1\n")
    );
    drop((a, b));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut d = TcpStream::connect(p.listen_addr()).await.unwrap();
    round_trip(&mut d, b"d").await.unwrap();
    echo.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_queue_is_bounded() {
    let (p, echo) = proxy(Limits { max_held: 1, ..Limits::default() }).await;
    p.add_fault("hang:2,max=5".parse().unwrap()).unwrap();
    let held = tokio::spawn({
        let addr = p.listen_addr();
        async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            round_trip(&mut s, b"held").await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(fresh(p.listen_addr(), b"x").await.is_err(), "the queue holds one");
    assert!(
        p.stats()
            .prometheus()
            .contains("seawall_proxy_rejected_total{reason=\"held_queue_full\"} 1\n")
    );
    // The held one goes through once the hang ends (2 s), well within its bound (5 s).
    tokio::time::timeout(Duration::from_secs(5), held).await.unwrap().unwrap().unwrap();
    echo.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_mode_ends_with_eof_and_reset_mode_with_an_error() {
    let (p, echo) = proxy(Limits::default()).await;
    p.add_fault("fail:60,mode=close".parse().unwrap()).unwrap();
    let mut s = TcpStream::connect(p.listen_addr()).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap();
    assert_eq!(n, 0, "a clean close");
    p.clear_faults();
    p.add_fault("fail:60,mode=reset".parse().unwrap()).unwrap();
    let r = fresh(p.listen_addr(), b"r").await;
    assert_eq!(r.map_err(|e| e.kind()).unwrap_err(), std::io::ErrorKind::ConnectionReset);
    echo.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_closes_the_listener_then_binds_the_same_port_again() {
    let (p, echo) = proxy(Limits::default()).await;
    let mut open = TcpStream::connect(p.listen_addr()).await.unwrap();
    round_trip(&mut open, b"before").await.unwrap();
    p.add_fault("fail:60,mode=refuse".parse().unwrap()).unwrap();
    // The loop notices within its tick (20 ms); poll for at most 2 s.
    let mut refused = false;
    for _ in 0..100 {
        match TcpStream::connect(p.listen_addr()).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                refused = true;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(refused, "connections were never refused");
    assert!(round_trip(&mut open, b"during").await.is_err(), "an open connection is reset");
    p.clear_faults();
    let mut back = None;
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(p.listen_addr()).await {
            back = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    round_trip(&mut back.expect("the listener came back"), b"after").await.unwrap();
    assert!(p.stats().prometheus().contains("seawall_proxy_faulted_total{fault=\"refuse\"} 1\n"));
    echo.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clearing_a_hang_releases_what_it_holds() {
    let (p, echo) = proxy(Limits::default()).await;
    p.add_fault("hang:60,max=30".parse().unwrap()).unwrap();
    let held = tokio::spawn({
        let addr = p.listen_addr();
        async move { fresh(addr, b"held").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "held while the hang is on");
    let t = std::time::Instant::now();
    p.clear_faults();
    tokio::time::timeout(Duration::from_secs(2), held).await.expect("released").unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_millis(500), "{:?}", t.elapsed());
    echo.abort();
}
