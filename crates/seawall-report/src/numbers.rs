//! How the tables and the verdict's words print numbers: one place, so a figure reads the same
//! in a table cell and in a sentence.

/// A fraction as a whole percentage that never rounds a little into nothing or everything.
pub(crate) fn pct(f: f64) -> String {
    if !f.is_finite() {
        return "—".to_string();
    }
    let p = f * 100.0;
    if p.abs() >= HUGE {
        return format!("{} %", huge(p));
    }
    let shown = format!("{p:.0}");
    // "0 %" must mean none and "100 %" must mean all: a storm's 0.4 % goodput is not zero.
    if shown == "0" && p > 0.0 {
        "<1 %".to_string()
    } else if shown == "100" && p < 100.0 {
        ">99 %".to_string()
    } else if shown == "-0" {
        "0 %".to_string()
    } else {
        format!("{shown} %")
    }
}

/// A multiplier, e.g. `27.0×` (one decimal below 100, none above).
pub(crate) fn times(x: f64) -> String {
    if !x.is_finite() {
        "—".to_string()
    } else if x.abs() >= HUGE {
        format!("{}×", huge(x))
    } else if x.abs() >= 100.0 {
        format!("{x:.0}×")
    } else {
        format!("{x:.1}×")
    }
}

/// Seconds with one decimal, e.g. `1.8 s`.
pub(crate) fn secs(s: f64) -> String {
    if !s.is_finite() {
        "—".to_string()
    } else if s.abs() >= HUGE {
        format!("{} s", huge(s))
    } else {
        format!("{s:.1} s")
    }
}

/// A plain number with `decimals` decimals, `—` if not finite.
pub(crate) fn number(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        "—".to_string()
    } else if x.abs() >= HUGE {
        huge(x)
    } else {
        format!("{x:.decimals$}")
    }
}

/// From here on numbers print in scientific notation, so a wild value cannot widen a column
/// past the terminal (an `f64` can have 309 digits before the point).
pub(crate) const HUGE: f64 = 1e7;

/// `1.0e300`.
pub(crate) fn huge(x: f64) -> String {
    format!("{x:.1e}")
}

/// The name with control characters (which would break a row) replaced by `?`.
pub(crate) fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}
