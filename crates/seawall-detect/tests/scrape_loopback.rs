//! The live path against real HTTP servers on 127.0.0.1: two services whose metrics pages
//! advance by a fixed step per scrape (so rates are exact up to timing, and ratios exact), a
//! storm starting at the tenth scrape, the classifier fed from the scrapes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use seawall_detect::scrape::{ScrapeError, Scraper};
use seawall_detect::{Classifier, Thresholds, VerdictKind};

/// Scrape number from which the dependency sees 3 attempts per call and goodput falls.
const STORM_FROM: u64 = 10;

fn edge_page(k: u64) -> String {
    let calm = k.min(STORM_FROM - 1);
    let storm = k.saturating_sub(STORM_FROM - 1);
    format!(
        "# TYPE seawall_server_throughput counter\n\
         seawall_server_throughput_total {}\n\
         seawall_server_goodput_total {}\n\
         seawall_client_call_started_total {}\n\
         seawall_client_attempt_started_total{{attempt=\"1\"}} {}\n\
         seawall_client_attempt_started_total{{attempt=\"2\"}} {}\n",
        100 * k,
        100 * calm + 10 * storm,
        100 * k,
        100 * k,
        200 * storm,
    )
}

fn dependency_page(k: u64) -> String {
    let calm = k.min(STORM_FROM - 1);
    let storm = k.saturating_sub(STORM_FROM - 1);
    format!(
        "seawall_server_throughput_total {}\nseawall_server_rejected_total{{reason=\"queue_full\"}} 0\n\
         seawall_server_oldest_queued_seconds {}\n",
        100 * calm + 300 * storm,
        if storm > 0 { 2.5 } else { 0.0 },
    )
}

/// Serves `/edge`, `/dep` and `/broken` on 127.0.0.1 from a thread of its own; returns the base URL.
fn serve() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (e, d) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
            let app = Router::new()
                .route(
                    "/edge",
                    get(move || async move { edge_page(e.fetch_add(1, Ordering::SeqCst)) }),
                )
                .route(
                    "/dep",
                    get(move || async move { dependency_page(d.fetch_add(1, Ordering::SeqCst)) }),
                )
                .route("/broken", get(|| async { "seawall_client_call_started_total{ 1\n" }));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv_timeout(Duration::from_secs(10)).unwrap())
}

#[test]
fn storm_is_called_from_live_scrapes() {
    let base = serve();
    let urls = [format!("{base}/edge"), format!("{base}/dep")];
    let mut scraper = Scraper::new(&urls, Duration::from_secs(2)).unwrap();
    let th = Thresholds { warmup_s: 0.3, ..Thresholds::default() };
    let mut c = Classifier::new(th);
    let started = Instant::now();
    let mut verdicts = Vec::new();
    for _ in 0..16 {
        let i = scraper.next_interval(Duration::from_millis(50)).unwrap();
        assert_eq!(i.targets.len(), 2);
        verdicts.push((c.push(i.sample), i));
    }
    assert!(started.elapsed() < Duration::from_secs(10), "bounded in time");
    let kinds: Vec<VerdictKind> = verdicts.iter().map(|(v, _)| v.verdict).collect();
    // Interval k compares scrape k-1 with scrape k; the storm shows from interval 10.
    let (before, after) = kinds.split_at(STORM_FROM as usize - 1);
    assert!(
        before.iter().all(|k| matches!(k, VerdictKind::Learning | VerdictKind::Healthy)),
        "{kinds:?}"
    );
    assert!(before.contains(&VerdictKind::Healthy), "{kinds:?}");
    assert!(after.iter().all(|k| *k == VerdictKind::RetryStorm), "{kinds:?}");
    let (v, i) = verdicts.last().unwrap();
    assert!((v.attempts_per_call - 3.0).abs() < 1e-9, "{v:?}");
    assert_eq!(i.targets[0].attempts_per_call, Some(3.0));
    assert_eq!(v.queue_age_s, 2.5);
    assert!((v.goodput - 0.1).abs() < 1e-9, "{v:?}");
    assert!(v.evidence.iter().any(|e| e.contains("edge flat")), "{:?}", v.evidence);
}

#[test]
fn bad_targets_fail_with_the_url_named() {
    let base = serve();
    let e = Scraper::new(&[format!("{base}/broken")], Duration::from_secs(2)).unwrap_err();
    assert!(matches!(e, ScrapeError::Parse { .. }), "{e}");
    let e = Scraper::new(&[format!("{base}/missing")], Duration::from_secs(2)).unwrap_err();
    assert!(matches!(e, ScrapeError::Status { status: 404, .. }), "{e}");
    // A port nobody listens on: bind one, learn its number, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = Scraper::new(&[format!("http://127.0.0.1:{port}/metrics")], Duration::from_secs(2))
        .unwrap_err();
    assert!(matches!(e, ScrapeError::Http { .. }) && e.to_string().contains("127.0.0.1"), "{e}");
}
