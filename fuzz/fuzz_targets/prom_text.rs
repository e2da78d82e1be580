//! The Prometheus / OpenMetrics text parser (seawall-detect's `prom`): never panic, respect the
//! documented limits, and printing what was parsed in the exposition format parses back to the
//! same samples.
#![no_main]

use std::fmt::Write;

use libfuzzer_sys::fuzz_target;
use seawall_detect::prom::{self, MAX_LABELS, MAX_SAMPLES, PromSample};

/// The exposition format of `samples`, one line each.
fn print(samples: &[PromSample]) -> String {
    let mut out = String::new();
    for s in samples {
        out.push_str(&s.name);
        if !s.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in s.labels.iter().enumerate() {
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let _ = write!(out, "{}{k}=\"{v}\"", if i == 0 { "" } else { "," });
            }
            out.push('}');
        }
        let value = match s.value {
            v if v.is_nan() => "NaN".to_string(),
            f64::INFINITY => "+Inf".to_string(),
            f64::NEG_INFINITY => "-Inf".to_string(),
            v => format!("{v:?}"),
        };
        let _ = writeln!(out, " {value}");
    }
    out
}

fn same(a: &[PromSample], b: &[PromSample]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.labels == y.labels
                && (x.value.to_bits() == y.value.to_bits()
                    || (x.value.is_nan() && y.value.is_nan()))
        })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(samples) = prom::parse(text) else { return };
    assert!(samples.len() <= MAX_SAMPLES);
    assert!(samples.iter().all(|s| s.labels.len() <= MAX_LABELS));
    let printed = print(&samples);
    let again = prom::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} does not parse: {e}"));
    assert!(same(&samples, &again), "{printed:?}: {samples:?} vs {again:?}");
});
