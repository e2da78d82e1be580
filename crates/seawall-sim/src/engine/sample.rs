//! Random draws: exponential gaps, service-time distributions, and the edge rate profile.

use seawall::rng::{Rng, SeededRng};

use crate::scenario::{Edge, Service};

/// The 99th percentile of the standard normal distribution.
const Z99: f64 = 2.326_347_874_040_841;

/// A service-time distribution, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dist {
    /// Exponential with this mean (0 = instantaneous).
    Exp(f64),
    /// Log-normal: `exp(mu + sigma · Z)`.
    LogNormal { mu: f64, sigma: f64 },
}

impl Dist {
    pub(crate) fn from_service(s: &Service) -> Dist {
        match (s.p50_ms, s.p99_ms) {
            (Some(p50), Some(p99)) => Dist::lognormal(p50, p99),
            _ => Dist::Exp(s.mean_ms * 1e6),
        }
    }

    /// Log-normal from its median and 99th percentile in milliseconds (incident write-ups quote both).
    pub(crate) fn lognormal(p50_ms: f64, p99_ms: f64) -> Dist {
        let mu = (p50_ms * 1e6).ln();
        let sigma = ((p99_ms / p50_ms).ln() / Z99).max(0.0);
        Dist::LogNormal { mu, sigma }
    }

    pub(crate) fn sample(self, rng: &mut SeededRng) -> f64 {
        match self {
            Dist::Exp(mean) if mean <= 0.0 => 0.0,
            Dist::Exp(mean) => exp(rng, mean),
            Dist::LogNormal { mu, sigma } => {
                // Box–Muller; one of the pair is enough here.
                let u1 = 1.0 - rng.next_f64();
                let u2 = rng.next_f64();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (mu + sigma * z).exp()
            }
        }
    }
}

/// An exponential draw with the given mean.
pub(crate) fn exp(rng: &mut SeededRng, mean: f64) -> f64 {
    -mean * (1.0 - rng.next_f64()).ln()
}

/// The edge arrival rate at `t` seconds: the steady rate (or its ramp) plus active spikes.
pub(crate) fn rate_at(e: &Edge, t: f64) -> f64 {
    let base = match e.ramp.iter().position(|p| p.at_s > t) {
        _ if e.ramp.is_empty() => e.rate,
        Some(0) => e.rate,
        Some(i) => {
            let (a, b) = (e.ramp[i - 1], e.ramp[i]);
            let f = if b.at_s > a.at_s { (t - a.at_s) / (b.at_s - a.at_s) } else { 1.0 };
            a.rate + (b.rate - a.rate) * f
        }
        None => e.ramp[e.ramp.len() - 1].rate,
    };
    base + e.spike.iter().filter(|s| s.start_s <= t && t < s.end_s).map(|s| s.rate).sum::<f64>()
}

/// An upper bound of [`rate_at`], for thinning.
pub(crate) fn max_rate(e: &Edge) -> f64 {
    let base = e.ramp.iter().map(|p| p.rate).fold(e.rate, f64::max);
    base + e.spike.iter().map(|s| s.rate).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_hits_its_median_and_p99() {
        let d = Dist::lognormal(40.0, 180.0);
        let mut rng = SeededRng::new(3);
        let mut v: Vec<f64> = (0..20_000).map(|_| d.sample(&mut rng) / 1e6).collect();
        v.sort_by(f64::total_cmp);
        let (p50, p99) = (v[10_000], v[19_800]);
        assert!((36.0..44.0).contains(&p50), "{p50}");
        assert!((160.0..200.0).contains(&p99), "{p99}");
    }

    #[test]
    fn ramps_interpolate_and_spikes_add() {
        let e: Edge = toml::from_str(
            "rate = 10\ndeadline_ms = 1\nramp = [{ at_s = 10, rate = 10 }, { at_s = 20, rate = 30 }]\n\
             spike = [{ start_s = 0, end_s = 5, rate = 100 }]",
        )
        .unwrap();
        assert_eq!(rate_at(&e, 1.0), 110.0);
        assert_eq!(rate_at(&e, 15.0), 20.0);
        assert_eq!(rate_at(&e, 25.0), 30.0);
        assert_eq!(max_rate(&e), 130.0);
    }
}
