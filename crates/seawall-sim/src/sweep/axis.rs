//! `--sweep PATH=RANGE`: one swept parameter, parsed strictly.
//!
//! RANGE is `START..END:STEP` (both ends included, `END` reached when the step lands on it),
//! or a comma list `V1,V2,…`. Values are numbers; each becomes a `--set PATH=VALUE` for its
//! grid point, so the path is checked by exactly the schema and validation of the file.

use seawall_report::sweep::Axis;

use crate::error::Error;

/// Most values one axis may take.
pub const MAX_VALUES: usize = 1000;

/// Parses `PATH=START..END:STEP` or `PATH=V1,V2,…` into an axis with ascending values.
///
/// ```
/// let a = seawall_sim::sweep::parse_axis("edge.rate=100..300:50").unwrap();
/// assert_eq!((a.path.as_str(), a.values), ("edge.rate", vec![100.0, 150.0, 200.0, 250.0, 300.0]));
/// assert!(seawall_sim::sweep::parse_axis("edge.rate=300..100:10").is_err());
/// ```
pub fn parse_axis(given: &str) -> Result<Axis, Error> {
    let fail = |m: String| Error::Sweep { given: given.to_string(), message: m };
    let (path, range) = given
        .split_once('=')
        .ok_or_else(|| fail("expected PATH=START..END:STEP, e.g. edge.rate=100..300:10".into()))?;
    let path = path.trim();
    if path.is_empty() || path.split('.').any(|p| p.trim().is_empty() || p != p.trim()) {
        return Err(fail("expected a dotted path such as edge.rate".into()));
    }
    let num = |s: &str, what: &str| {
        let s = s.trim();
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(fail(format!("{what} `{s}` is not a finite number"))),
        }
    };
    let values = match range.split_once("..") {
        Some((start, rest)) => {
            let (end, step) = rest
                .split_once(':')
                .ok_or_else(|| fail("a range needs a step: START..END:STEP".into()))?;
            let (a, b, step) = (num(start, "start")?, num(end, "end")?, num(step, "step")?);
            if step <= 0.0 {
                return Err(fail(format!("the step must be > 0, got {step}")));
            }
            if b < a {
                return Err(fail(format!("the end {b} is below the start {a}")));
            }
            // A step that lands on the end within rounding includes it.
            let n = ((b - a) / step + 1e-9).floor() + 1.0;
            if n > MAX_VALUES as f64 {
                return Err(fail(format!("{n} values; at most {MAX_VALUES} per axis")));
            }
            (0..n as usize).map(|i| tidy(a + i as f64 * step)).collect()
        }
        None => {
            let mut v = range.split(',').map(|s| num(s, "value")).collect::<Result<Vec<_>, _>>()?;
            if v.len() > MAX_VALUES {
                return Err(fail(format!("{} values; at most {MAX_VALUES} per axis", v.len())));
            }
            v.sort_by(f64::total_cmp);
            if v.windows(2).any(|w| w[0] == w[1]) {
                return Err(fail("a value is listed twice".into()));
            }
            v
        }
    };
    Ok(Axis { path: path.to_string(), values })
}

/// `100 + 3 × 0.1` is `100.30000000000001`; a grid value should read as typed.
fn tidy(v: f64) -> f64 {
    let r = (v * 1e9).round() / 1e9;
    if r.is_finite() { r } else { v }
}

/// The `--set` text of one value: a whole number as an integer (so integer fields accept it),
/// anything else in Rust's shortest round-trip form.
pub(crate) fn set(path: &str, v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{path}={}", v as i64)
    } else {
        format!("{path}={v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_include_their_end_and_read_as_typed() {
        let a = parse_axis("fault.0.duration_s=5..30:5").unwrap();
        assert_eq!(a.values, [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
        let a = parse_axis("x.y=0.1..0.3:0.1").unwrap();
        assert_eq!(a.values, [0.1, 0.2, 0.3]);
        assert_eq!(parse_axis("x=7..7:1").unwrap().values, [7.0]);
        assert_eq!(parse_axis("x=-5..5:5").unwrap().values, [-5.0, 0.0, 5.0]);
        assert_eq!(parse_axis("x=300,100,200").unwrap().values, [100.0, 200.0, 300.0]);
    }

    #[test]
    fn bad_axes_say_why() {
        for (given, says) in [
            ("edge.rate", "expected PATH="),
            ("=1..2:1", "dotted path"),
            ("edge..rate=1..2:1", "dotted path"),
            ("edge.rate=1..2", "needs a step"),
            ("edge.rate=1..2:0", "step must be > 0"),
            ("edge.rate=1..2:-1", "step must be > 0"),
            ("edge.rate=3..2:1", "below the start"),
            ("edge.rate=a..2:1", "start `a`"),
            ("edge.rate=1..inf:1", "end `inf`"),
            ("edge.rate=0..1e9:1", "at most 1000"),
            ("edge.rate=1,1", "twice"),
            ("edge.rate=", "value ``"),
        ] {
            let e = parse_axis(given).unwrap_err().to_string();
            assert!(e.contains(says), "{given}: {e}");
            assert!(e.starts_with(&format!("--sweep {given}:")), "{e}");
        }
    }

    #[test]
    fn set_texts_keep_integers_integral() {
        assert_eq!(set("tier.db.workers", 30.0), "tier.db.workers=30");
        assert_eq!(set("edge.rate", 0.5), "edge.rate=0.5");
    }
}
