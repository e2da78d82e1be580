//! The readable rendering: paths, dependency loads, hops with their layers, findings.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Report, Severity};

/// `54000.0` → `54,000`; `1.1` → `1.1` (at most three decimals, no trailing zeros).
pub fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let rounded = (x * 1000.0).round() / 1000.0;
    let int = rounded.trunc().abs() as u64;
    let frac = format!("{:.3}", rounded.fract().abs());
    let frac = frac.trim_start_matches('0').trim_end_matches('0').trim_end_matches('.');
    let digits = int.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    let sign = if rounded < 0.0 { "-" } else { "" };
    format!("{sign}{out}{frac}")
}

/// `1.5 s`, `250 ms`.
pub fn human_duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", thousands(d.as_secs_f64()))
    } else {
        format!("{} ms", thousands(d.as_secs_f64() * 1000.0))
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), thousands)
}

fn verdict(peak: f64, cap: Option<f64>, which: &str) -> Option<String> {
    let c = cap?;
    Some(if peak <= c {
        format!(
            "survives {which}: yes — {} rps against a {which} capacity of {}",
            thousands(peak),
            thousands(c)
        )
    } else {
        format!(
            "survives {which}: no — {} rps against a {which} capacity of {}",
            thousands(peak),
            thousands(c)
        )
    })
}

/// Renders the report for a terminal. `title` is printed first (usually the graph file).
pub fn render(report: &Report, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "seawall audit: {title}\n");
    let _ = writeln!(
        s,
        "Paths — attempts reaching the last service per entry request when everything fails"
    );
    let width =
        report.paths.iter().map(|p| p.path.join(" → ").chars().count()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        s,
        "  {:<width$}  {:>7}  {:>8}  {:>10}  {:>12}",
        "PATH", "WORST", "BOUNDED", "PEAK rps", "BOUNDED rps"
    );
    for p in &report.paths {
        let name = p.path.join(" → ");
        let pad = width - name.chars().count();
        let _ = writeln!(
            s,
            "  {name}{:pad$}  {:>7}  {:>8}  {:>10}  {:>12}",
            "",
            thousands(p.worst_case_attempts as f64),
            opt(p.bounded_attempts),
            opt(p.peak_rps),
            opt(p.bounded_peak_rps)
        );
    }
    if !report.dependencies.is_empty() {
        let _ = writeln!(s, "\nDependencies — all paths at once");
        for d in &report.dependencies {
            let _ = writeln!(
                s,
                "  {}: {} rps normally, {} rps worst case, {} rps with budgets",
                d.service,
                thousands(d.normal_rps),
                thousands(d.peak_rps),
                thousands(d.bounded_peak_rps)
            );
            for v in [
                verdict(d.bounded_peak_rps, d.capacity_rps, "warm"),
                verdict(d.bounded_peak_rps, d.cold_capacity_rps, "cold"),
            ]
            .into_iter()
            .flatten()
            {
                let _ = writeln!(s, "    {v}");
            }
        }
    }
    let _ = writeln!(s, "\nHops — every place that retries");
    for h in &report.hops {
        let _ = writeln!(
            s,
            "  {} → {}  ×{} (bounded ×{})",
            h.from,
            h.to,
            h.worst_case_attempts,
            thousands(h.bounded_attempts)
        );
        for l in &h.layers {
            let budget = l.budget.as_deref().unwrap_or("no budget");
            let implicit = if l.implicit { "implicit, " } else { "" };
            let _ = write!(
                s,
                "    {:<5} ×{:<2} {implicit}{budget}  [{}]",
                l.place.to_string(),
                l.attempts,
                l.source
            );
            if let Some(n) = &l.note {
                let _ = write!(s, "  — {n}");
            }
            s.push('\n');
        }
    }
    let count = |sev| report.findings.iter().filter(|f| f.severity == sev).count();
    let _ = writeln!(
        s,
        "\nFindings — {} error(s), {} warning(s), {} info",
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    );
    if report.findings.is_empty() {
        let _ = writeln!(s, "  none");
    }
    for f in &report.findings {
        let _ = writeln!(
            s,
            "  {:<7} {}  {}\n          {}\n          fix: {}",
            f.severity.as_str(),
            f.rule,
            f.location,
            f.message,
            f.fix
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(thousands(54_000.0), "54,000");
        assert_eq!(thousands(1.1), "1.1");
        assert_eq!(thousands(1_234_567.25), "1,234,567.25");
        assert_eq!(thousands(0.0), "0");
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    }
}
