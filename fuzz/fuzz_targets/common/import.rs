//! What every importer target checks.

use std::time::Duration;

use seawall_audit::import::{Select, parse_duration};
use seawall_audit::model::RetryLayer;

/// `parse_duration` refuses anything over ten years; the importers use it for every timeout.
const TEN_YEARS: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// Names the candidates the seed corpus uses (a VirtualService, route, service, profile).
pub fn select() -> Select {
    Select {
        name: Some("payments".into()),
        route: Some("default".into()),
        service: Some("payments.Payments".into()),
        method: Some("Charge".into()),
        profile: Some("prod".into()),
    }
}

/// Properties of any importer's answer.
pub fn check(layers: &[RetryLayer]) {
    for l in layers {
        assert!(l.attempts >= 1, "{l:?}");
        for d in [l.per_try_timeout, l.timeout].into_iter().flatten() {
            assert!(d <= TEN_YEARS, "timeout over ten years: {l:?}");
        }
    }
}

/// Fuzzes the duration parser the importers share with the same input.
pub fn durations(text: &str) {
    if let Some(d) = parse_duration(text) {
        assert!(d <= TEN_YEARS, "{text:?} → {d:?}");
    }
}
