use super::*;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

fn trip(b: &Breaker, t: Instant) {
    for _ in 0..5 {
        let p = b.admit(t, 0.5).unwrap();
        b.record(t, p, false);
    }
}

#[test]
fn failure_rate_opens() {
    let cfg = BreakerConfig::default().with_consecutive_failures(0).unwrap();
    let b = Breaker::new(cfg);
    let t = Instant::ZERO;
    for i in 0..19 {
        let p = b.admit(t, 0.5).unwrap();
        b.record(t, p, i % 2 == 0);
    }
    assert_eq!(b.state(t), BreakerState::Closed, "below min_calls");
    let p = b.admit(t, 0.5).unwrap();
    b.record(t, p, false);
    assert_eq!(b.state(t), BreakerState::Open, "20 calls, 10 failures = 50 %");
}

#[test]
fn old_failures_leave_the_window() {
    let cfg = BreakerConfig::default().with_consecutive_failures(0).unwrap();
    let b = Breaker::new(cfg);
    for i in 0..19u64 {
        let t = Instant::ZERO + Duration::from_secs(i * 2);
        let p = b.admit(t, 0.5).unwrap();
        b.record(t, p, false);
    }
    assert_eq!(b.state(Instant::ZERO + Duration::from_secs(40)), BreakerState::Closed);
}

#[test]
fn failed_probe_reopens_longer_and_jittered() {
    let b = Breaker::new(BreakerConfig::default());
    let t0 = Instant::ZERO;
    trip(&b, t0);
    // draw 0.5 → exactly the base: 5 s
    assert!(b.admit(t0 + Duration::from_millis(4999), 0.5).is_err());
    let t1 = t0 + Duration::from_secs(5);
    let p = b.admit(t1, 0.5).unwrap();
    b.record(t1, p, false);
    assert!(b.admit(t1 + Duration::from_millis(9999), 0.5).is_err(), "second open period is 10 s");
    assert!(b.admit(t1 + Duration::from_secs(10), 0.5).is_ok());
}

#[test]
fn jitter_spreads_open_period() {
    let b = Breaker::new(BreakerConfig::default());
    let t = Instant::ZERO;
    for _ in 0..4 {
        let p = b.admit(t, 0.5).unwrap();
        b.record(t, p, false);
    }
    let p = b.admit(t, 0.5).unwrap();
    b.record_with_draw(t, p, false, 0.0);
    assert!(b.admit(t + Duration::from_secs(4), 0.5).is_ok(), "draw 0 → 0.8 × 5 s");
}

#[test]
fn hung_probe_is_released() {
    let b = Breaker::new(BreakerConfig::default());
    trip(&b, Instant::ZERO);
    let t = Instant::ZERO + Duration::from_secs(6);
    let _hung = b.admit(t, 0.5).unwrap();
    assert!(b.admit(t + Duration::from_secs(9), 0.5).is_err());
    assert!(b.admit(t + Duration::from_secs(10), 0.5).is_ok());
}

#[test]
fn rejects_bad_config() {
    assert!(BreakerConfig::default().with_probes(0, Duration::from_secs(1)).is_err());
    assert!(BreakerConfig::default().with_failure_rate(1.5, Duration::from_secs(10), 1).is_err());
    assert!(
        BreakerConfig::default()
            .with_open(Duration::from_secs(10), Duration::from_secs(5), 0.1)
            .is_err()
    );
    assert!(
        BreakerConfig::default()
            .with_open(Duration::from_secs(1), Duration::from_secs(5), 1.0)
            .is_err()
    );
}

/// Many threads race for the half-open slots; never more than `probes` are out at once.
#[test]
fn half_open_admits_at_most_probes_concurrently() {
    for probes in [1u32, 3] {
        let cfg = BreakerConfig::default().with_probes(probes, Duration::from_secs(3600)).unwrap();
        let b = Arc::new(Breaker::new(cfg));
        trip(&b, Instant::ZERO);
        let t = Instant::ZERO + Duration::from_secs(10);
        let out = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (b, out, peak) = (b.clone(), out.clone(), peak.clone());
                std::thread::spawn(move || {
                    for i in 0..2000u32 {
                        if let Ok(p) = b.admit(t, 0.5) {
                            let n = out.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(n, Ordering::SeqCst);
                            std::thread::yield_now();
                            out.fetch_sub(1, Ordering::SeqCst);
                            // abandon the probe: the breaker stays half-open
                            let _ = i;
                            b.release(p);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(
            peak.load(Ordering::SeqCst) <= probes,
            "peak {} > {probes}",
            peak.load(Ordering::SeqCst)
        );
        assert!(peak.load(Ordering::SeqCst) >= 1);
    }
}
