//! detect's CSV replay reader, and the classifier over what it reads: never panic; every sample
//! is finite and non-negative, as the reader promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_detect::{Classifier, Thresholds, samples_from_csv};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(samples) = samples_from_csv(text) else { return };
    let mut c = Classifier::new(Thresholds::default());
    for s in samples {
        for v in [s.t, s.edge_rps, s.goodput_rps, s.dependency_rps, s.queue_age_s, s.refusals_rps] {
            assert!(v.is_finite() && v >= 0.0, "{s:?}");
        }
        let _ = c.push(s);
    }
});
