//! The `--simulate FAULT` argument: what goes wrong at the dependency, for how long, from when.
//!
//! Grammar: `KIND:SECONDS[@START]`, e.g. `fail:10`, `outage:30@20`, `slow:15`, `gc:5@12.5`.
//! Parsing is strict and every error says what was expected, because a typo here would otherwise
//! simulate a different incident than the one the reader asked about.

use std::fmt;

/// When the fault starts if `@START` is not given, seconds into the run: long enough for the
/// run to show a healthy baseline first.
pub const DEFAULT_START_S: f64 = 10.0;

/// What goes wrong at the dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The dependency hangs: requests queue and nothing is served.
    Outage,
    /// Every request to the dependency fails at once (a database failing fast).
    Fail,
    /// The dependency's latency is multiplied by [`SLOW_FACTOR`].
    Slow,
    /// The dependency loses all its capacity (a stop-the-world GC pause).
    Gc,
}

/// How much slower `slow` makes the dependency: an index slowdown (p50 40 → 240 ms).
pub const SLOW_FACTOR: f64 = 6.0;

/// A parsed FAULT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// How long, seconds.
    pub duration_s: f64,
    /// When it starts, seconds into the run.
    pub start_s: f64,
}

const EXPECTED: &str = "KIND:SECONDS[@START] with KIND one of outage, fail, slow, gc \
                        (e.g. fail:10 or outage:30@20)";

impl Fault {
    /// Parses `KIND:SECONDS[@START]`.
    pub fn parse(text: &str) -> Result<Fault, String> {
        let bad = |why: &str| format!("--simulate {text:?}: {why}; expected {EXPECTED}");
        let (kind, rest) = text.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let kind = match kind.trim() {
            "outage" => FaultKind::Outage,
            "fail" => FaultKind::Fail,
            "slow" => FaultKind::Slow,
            "gc" => FaultKind::Gc,
            other => return Err(bad(&format!("unknown fault kind {other:?}"))),
        };
        let (dur, start) = match rest.split_once('@') {
            Some((d, s)) => (d, Some(s)),
            None => (rest, None),
        };
        let seconds = |what: &str, v: &str, min: f64| -> Result<f64, String> {
            match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x >= min && x <= 86_400.0 => Ok(x),
                _ => {
                    Err(bad(&format!("{what} {v:?} is not a number of seconds in [{min}, 86400]")))
                }
            }
        };
        let duration_s = seconds("duration", dur, 0.001)?;
        let start_s = match start {
            Some(s) => seconds("start", s, 0.0)?,
            None => DEFAULT_START_S,
        };
        Ok(Fault { kind, duration_s, start_s })
    }

    /// The end of the fault, seconds into the run.
    pub fn end_s(&self) -> f64 {
        self.start_s + self.duration_s
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FaultKind::Outage => "outage (requests held)",
            FaultKind::Fail => "every request failing",
            FaultKind::Slow => "latency ×6",
            FaultKind::Gc => "capacity loss (GC pause)",
        };
        write!(f, "{what} for {} s from {} s", self.duration_s, self.start_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_kinds_parse_with_and_without_a_start() {
        let f = Fault::parse("fail:10").unwrap();
        assert_eq!(f, Fault { kind: FaultKind::Fail, duration_s: 10.0, start_s: 10.0 });
        let f = Fault::parse("outage:30@20").unwrap();
        assert_eq!(
            (f.kind, f.duration_s, f.start_s, f.end_s()),
            (FaultKind::Outage, 30.0, 20.0, 50.0)
        );
        assert_eq!(Fault::parse("slow:1.5").unwrap().kind, FaultKind::Slow);
        assert_eq!(Fault::parse("gc:5@0").unwrap().start_s, 0.0);
    }

    #[test]
    fn bad_strings_say_what_was_expected() {
        for bad in [
            "",
            "fail",
            "crash:10",
            "fail:",
            "fail:-1",
            "fail:0",
            "fail:ten",
            "fail:10@",
            "fail:10@x",
            "fail:nan",
            "fail:1e9",
        ] {
            let e = Fault::parse(bad).unwrap_err();
            assert!(e.contains("expected KIND:SECONDS[@START]"), "{bad}: {e}");
        }
        assert!(Fault::parse("crash:10").unwrap_err().contains("unknown fault kind \"crash\""));
    }
}
