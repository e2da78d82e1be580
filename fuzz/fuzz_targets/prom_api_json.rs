//! Prometheus HTTP API answers (seawall-detect's `prometheus::json::parse_answer`, for instant
//! and range queries): never panic, and an accepted answer is within the documented limits with
//! every series' points in time order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_detect::prometheus::json::{MAX_POINTS, MAX_SERIES, parse_answer};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else { return };
    for want_matrix in [false, true] {
        let Ok(answer) = parse_answer(body, want_matrix) else { continue };
        assert!(answer.series.len() <= MAX_SERIES);
        let points: usize = answer.series.iter().map(|s| s.points.len()).sum();
        assert!(points <= MAX_POINTS);
        for s in &answer.series {
            assert!(s.points.windows(2).all(|w| w[0].0 <= w[1].0), "{s:?}");
            assert!(s.points.iter().all(|p| p.0.is_finite()), "{s:?}");
        }
    }
});
