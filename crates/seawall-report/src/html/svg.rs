//! Hand-written SVG: linear scales, "nice" ticks, axes, gapped polylines and the fault band.
//!
//! Every coordinate is printed with one decimal, so equal inputs give byte-identical output and
//! the page stays small. Values outside the plot are clamped to its edge rather than drawn over
//! the neighbouring chart.

use std::fmt::Write;

use super::esc;

const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

/// How tick labels print a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Unit {
    /// Requests or attempts per second (`1.2k`).
    Rps,
    /// Seconds (`0.5`).
    Seconds,
    /// A multiplier (`27×`).
    Times,
    /// A fraction shown as a percentage (`50 %`).
    Fraction,
}

/// One drawable line: a legend name, a tooltip, a style, and (x, y) points; a non-finite point
/// is a gap.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub(super) name: String,
    pub(super) tip: String,
    pub(super) style: Style,
    pub(super) points: Vec<(f64, f64)>,
}

/// Stroke colour, dash pattern (empty for solid) and width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Style {
    pub(super) color: &'static str,
    pub(super) dash: &'static str,
    pub(super) width: f64,
}

/// Everything one chart needs: domains, unit, lines, shaded band and marks.
#[derive(Debug)]
pub(super) struct Plot<'a> {
    /// Width and height in SVG user units. The chart scales to its column; choosing a width
    /// near the column's width in pixels keeps the 10 px labels readable at any column count.
    pub(super) size: (f64, f64),
    pub(super) x_max: f64,
    pub(super) y_max: f64,
    pub(super) unit: Unit,
    pub(super) lines: &'a [Line],
    /// The fault window (start, end, label), shaded.
    pub(super) band: Option<(f64, f64, &'a str)>,
    /// A dashed horizontal reference (e.g. 1× amplification).
    pub(super) reference: Option<f64>,
    /// A vertical mark with its label (e.g. the moment of recovery).
    pub(super) mark: Option<(f64, String)>,
    /// Accessible name of the whole chart.
    pub(super) label: String,
}

/// A value at or above `v` that makes round ticks (1, 2 or 5 × 10^k), and the tick step.
pub(super) fn nice_max(v: f64) -> (f64, f64) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 0.25);
    }
    let raw = v / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let top = (v / step).ceil() * step;
    if top.is_finite() && step > 0.0 { (top, step) } else { (v, v) }
}

/// A short tick label: `950`, `1.2k`, `54k`, `0.25`.
pub(super) fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e12 || (a > 0.0 && a < 1e-3) {
        // Far from everyday sizes, scientific notation: short, and cheap to print (an exact
        // 300-digit decimal expansion is not).
        return format!("{v:.1e}");
    }
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut s = format!("{x:.2}");
    while s.contains('.') && (s.ends_with('0') || s.ends_with('.')) {
        s.pop();
    }
    if s == "-0" {
        s = "0".into();
    }
    s + suffix
}

fn tick_label(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Rps | Unit::Seconds => short(v),
        Unit::Times => format!("{}×", short(v)),
        Unit::Fraction => format!("{} %", short(v * 100.0)),
    }
}

fn px_x(x: f64, x_max: f64, w: f64) -> f64 {
    let f = if x_max > 0.0 && x.is_finite() { (x / x_max).clamp(0.0, 1.0) } else { 0.0 };
    LEFT + f * (w - LEFT - RIGHT)
}

fn px_y(y: f64, y_max: f64, h: f64) -> f64 {
    let f = if y_max > 0.0 && y.is_finite() { (y / y_max).clamp(0.0, 1.0) } else { 0.0 };
    h - BOTTOM - f * (h - TOP - BOTTOM)
}

/// Renders one chart as an inline `<svg>` element.
pub(super) fn render(p: &Plot<'_>) -> String {
    let (w, h) = p.size;
    let (x_top, x_step) = nice_max(p.x_max);
    let x_max = p.x_max.max(f64::MIN_POSITIVE);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg viewBox="0 0 {w:.0} {h:.0}" role="img" aria-label="{}"><title>{}</title>"#,
        esc(&p.label),
        esc(&p.label)
    );
    // A fault with an unknown edge cannot be placed; one given backwards is still a window.
    if let Some((a, b, what)) = p.band.filter(|(a, b, _)| a.is_finite() && b.is_finite()) {
        let (x0, x1) = (px_x(a.min(b), x_max, w), px_x(a.max(b), x_max, w));
        let _ = write!(
            s,
            r#"<rect class="fault" x="{x0:.1}" y="{TOP:.1}" width="{:.1}" height="{:.1}"><title>fault: {}</title></rect>"#,
            (x1 - x0).max(1.0),
            h - TOP - BOTTOM,
            esc(what)
        );
    }
    // Horizontal grid and y ticks.
    let n = ((p.y_max / nice_max(p.y_max).1).round() as usize).min(10);
    let y_step = if n > 0 { p.y_max / n as f64 } else { p.y_max };
    for i in 0..=n {
        let v = y_step * i as f64;
        let y = px_y(v, p.y_max, h);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text class="yt" x="{:.1}" y="{:.1}">{}</text>"#,
            w - RIGHT,
            LEFT - 4.0,
            y + 3.5,
            esc(&tick_label(v, p.unit))
        );
    }
    // X ticks, in seconds from the start of the run.
    let nx = ((x_top / x_step).round() as usize).min(12);
    for i in 0..=nx {
        let v = x_step * i as f64;
        if v > x_max * 1.0001 {
            break;
        }
        let x = px_x(v, x_max, w);
        let _ = write!(
            s,
            r#"<line class="axis" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}"/><text class="xt" x="{x:.1}" y="{:.1}">{}{}</text>"#,
            h - BOTTOM,
            h - BOTTOM + 3.0,
            h - BOTTOM + 13.0,
            short(v),
            if i == 0 { " s" } else { "" }
        );
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/>"#,
        h - BOTTOM,
        w - RIGHT,
        h - BOTTOM
    );
    if let Some(r) = p.reference.filter(|r| r.is_finite() && *r <= p.y_max) {
        let y = px_y(r, p.y_max, h);
        let _ = write!(
            s,
            r#"<line class="ref" x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#,
            w - RIGHT
        );
    }
    // The first line listed is drawn last, on top: where two lines coincide, the one the legend
    // names first is the one seen.
    for line in p.lines.iter().rev() {
        draw_line(&mut s, line, (x_max, p.y_max), p.size);
    }
    if let Some((t, label)) = p.mark.as_ref().filter(|(t, _)| t.is_finite()) {
        let x = px_x(*t, x_max, w);
        // The label sits low, where a recovered run's goodput has left the chart empty; right of
        // the mark, or left of it near the right edge.
        let (tx, anchor) = if x > w - 90.0 { (x - 3.0, "end") } else { (x + 3.0, "start") };
        let _ = write!(
            s,
            r#"<line class="mark" x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{:.1}"/><text class="mk" x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            h - BOTTOM,
            h - BOTTOM - 6.0,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

fn draw_line(s: &mut String, line: &Line, (x_max, y_max): (f64, f64), (w, h): (f64, f64)) {
    let dash = if line.style.dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{}""#, line.style.dash)
    };
    // Non-finite points split the line into runs, so a gap in the data is a gap on the page.
    for run in line.points.split(|(x, y)| !(x.is_finite() && y.is_finite())) {
        if run.is_empty() {
            continue;
        }
        let mut pts = String::new();
        for (x, y) in run {
            let _ = write!(pts, "{:.1},{:.1} ", px_x(*x, x_max, w), px_y(*y, y_max, h));
        }
        let _ = write!(
            s,
            r#"<polyline points="{}" stroke="{}" stroke-width="{:.1}"{dash}><title>{}</title></polyline>"#,
            pts.trim_end(),
            line.style.color,
            line.style.width,
            esc(&line.tip)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_maxima_are_round() {
        assert_eq!(nice_max(280.0), (300.0, 100.0));
        assert_eq!(nice_max(54_000.0), (60_000.0, 20_000.0));
        assert_eq!(nice_max(1.0), (1.0, 0.25));
        assert_eq!(nice_max(0.0), (1.0, 0.25));
        assert_eq!(nice_max(f64::NAN), (1.0, 0.25));
        let (top, step) = nice_max(f64::MAX);
        assert!(top.is_finite() && step.is_finite());
    }

    #[test]
    fn short_labels() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1500.0), "1.5k");
        assert_eq!(short(54_000.0), "54k");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(2_000_000.0), "2M");
        assert_eq!(short(1e300), "1.0e300");
        assert_eq!(short(f64::MIN_POSITIVE), "2.2e-308");
    }
}
