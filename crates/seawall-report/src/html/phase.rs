//! The sweep's page: per policy, the hidden capacity in words and a phase diagram of the grid —
//! a strip for one swept parameter, a heat map for two — each cell coloured by its verdict
//! (recovered, some seeds, stays down) and shaded by its recovery time, the boundary drawn over.

use std::fmt::Write;

use super::{esc, page_from, svg::short};
use crate::sweep::{Boundary, BoundaryKind, Point, Sweep};
use crate::table;

/// Cell colours (Okabe–Ito): recovered fast → slow, some seeds, stays down.
const FAST: (f64, f64, f64) = (0.0, 158.0, 115.0);
const SLOW: (f64, f64, f64) = (200.0, 232.0, 208.0);
const MIXED: &str = "#E69F00";
const STUCK: &str = "#D55E00";
const LATE: &str = "#F0E442";
const LABEL_W: f64 = 96.0;

/// Renders a sweep as one self-contained HTML page (inline CSS and SVG, no script):
/// the boundary found per policy in a sentence, then its phase diagram, then every point in
/// a table. Deterministic: equal sweeps give byte-identical pages.
pub fn render_sweep_html(sweep: &Sweep) -> String {
    let mut s = header(sweep);
    let slowest = sweep
        .points
        .iter()
        .filter_map(|p| p.recovery_s)
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    for policy in &sweep.policies {
        let bounds: Vec<&Boundary> =
            sweep.boundaries.iter().filter(|b| &b.policy == policy).collect();
        let good = bounds.iter().any(|b| b.kind != BoundaryKind::StuckEverywhere);
        let _ = write!(
            s,
            r#"<section class="phase"><div class="colhead {}"><h2>{}</h2>"#,
            if good { "good" } else { "bad" },
            esc(policy)
        );
        for b in &bounds {
            let _ = write!(s, r#"<p class="verdict">{}</p>"#, esc(&b.words));
        }
        s.push_str("</div>");
        let points: Vec<&Point> = sweep.points.iter().filter(|p| &p.policy == policy).collect();
        s.push_str(&diagram(sweep, &points, &bounds, slowest));
        s.push_str("</section>");
    }
    s.push_str(&legend(slowest));
    s.push_str(r#"<section class="after"><div><h2 class="sec">Every point</h2>"#);
    s.push_str(&points_table(sweep));
    s.push_str("</div>");
    s.push_str(&how_to_read());
    s.push_str("</section>");
    page_from(&format!("seawall sweep · {}", sweep.scenario), &s, "sweep.json")
}

fn header(sw: &Sweep) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<header><h1>{} · sweep</h1><p class="desc">{}</p><dl class="meta">"#,
        esc(&sw.scenario),
        esc(&sw.description)
    );
    let mut fact = |k: &str, v: String| {
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&v));
    };
    for a in &sw.axes {
        let (lo, hi) = (a.values.first().copied(), a.values.last().copied());
        let range = match (lo, hi) {
            (Some(lo), Some(hi)) => {
                format!("{} … {} ({} values)", short(lo), short(hi), a.values.len())
            }
            _ => "no values".into(),
        };
        fact(&a.path, range);
    }
    fact("seeds per point", sw.seeds.to_string());
    fact("base seed", sw.seed.to_string());
    if !sw.sets.is_empty() {
        fact("set", sw.sets.join(" "));
    }
    // The fault as the scenario file has it; a swept `fault.…` value replaces it point by point.
    let swept: Vec<&str> =
        sw.axes.iter().map(|a| a.path.as_str()).filter(|p| p.starts_with("fault.")).collect();
    let mut fault = match &sw.fault {
        Some(f) => {
            format!("{}, from {} to {}", f.kind, table::secs(f.start_s), table::secs(f.end_s))
        }
        None => "none injected".into(),
    };
    if !swept.is_empty() {
        let _ = write!(fault, " in the scenario; each point sets {}", swept.join(" and "));
    }
    fact("fault", fault);
    s.push_str("</dl></header>");
    s
}

/// A cell's fill: recovered in every seed shaded by recovery time, some seeds, or none.
fn fill(p: &Point, slowest: f64) -> String {
    let share = p.share();
    if share <= 0.0 && p.late_seeds > 0 {
        return LATE.into();
    }
    if share <= 0.0 {
        return STUCK.into();
    }
    if share < 1.0 {
        return MIXED.into();
    }
    let f = (p.recovery_s.unwrap_or(0.0) / slowest).clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
    format!("#{:02X}{:02X}{:02X}", mix(FAST.0, SLOW.0), mix(FAST.1, SLOW.1), mix(FAST.2, SLOW.2))
}

/// What a cell says: its recovery time, its seeds' split, or ✗.
fn label(p: &Point) -> String {
    let n = p.runs.len();
    if p.recovered_seeds == 0 && p.late_seeds > 0 {
        "late".into()
    } else if p.recovered_seeds == 0 {
        "✗".into()
    } else if p.recovered_seeds < n {
        format!("{}/{n}", p.recovered_seeds)
    } else {
        p.recovery_s
            .map_or_else(|| "✓".into(), |r| format!("{}s", short((r * 10.0).round() / 10.0)))
    }
}

/// Fractional cell index of `v` along `values` (ascending), for drawing the boundary.
fn position(values: &[f64], v: f64) -> Option<f64> {
    let i = values.windows(2).position(|w| w[0] <= v && v <= w[1])?;
    let (a, b) = (values[i], values[i + 1]);
    Some(i as f64 + if b > a { (v - a) / (b - a) } else { 0.0 })
}

fn diagram(sw: &Sweep, points: &[&Point], bounds: &[&Boundary], slowest: f64) -> String {
    let Some(x_axis) = sw.axes.first() else { return String::new() };
    let y_axis = sw.axes.get(1);
    let (nx, ny) = (x_axis.values.len(), y_axis.map_or(1, |a| a.values.len()));
    if nx == 0 || ny == 0 {
        return String::new();
    }
    let w = 960.0;
    let cw = (w - LABEL_W - 10.0) / nx as f64;
    let ch = if y_axis.is_some() { (cw * 0.8).clamp(22.0, 44.0) } else { 48.0 };
    // Room above the cells for the y axis's name (2-D) or the boundary's value (1-D).
    let top = 20.0;
    let h = top + ny as f64 * ch + 40.0;
    let mut s = format!(
        r#"<svg class="phase" viewBox="0 0 {w:.0} {h:.0}" role="img" aria-label="phase diagram"><title>recovered or stuck over {}</title>"#,
        esc(&sw.axes.iter().map(|a| a.path.as_str()).collect::<Vec<_>>().join(" × "))
    );
    let cell_at = |ix: usize, iy: usize| -> (f64, f64) {
        (LABEL_W + ix as f64 * cw, top + (ny - 1 - iy) as f64 * ch)
    };
    for p in points {
        let Some(ix) =
            p.at.get(&x_axis.path).and_then(|v| x_axis.values.iter().position(|x| x == v))
        else {
            continue;
        };
        let iy = match y_axis {
            Some(a) => match p.at.get(&a.path).and_then(|v| a.values.iter().position(|x| x == v)) {
                Some(i) => i,
                None => continue,
            },
            None => 0,
        };
        let (x, y) = cell_at(ix, iy);
        let tip = format!(
            "{}: {} of {} seeds recovered{}, {} healed late; peak amplification {}; goodput after {}",
            p.at.iter().map(|(k, v)| format!("{k} = {}", short(*v))).collect::<Vec<_>>().join(", "),
            p.recovered_seeds,
            p.runs.len(),
            p.recovery_s.map_or(String::new(), |r| format!(" (median {})", table::secs(r))),
            p.late_seeds,
            table::times(p.peak_amplification),
            table::pct(p.goodput_after),
        );
        let _ = write!(
            s,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}" stroke="#fff"><title>{}</title></rect>"##,
            cw,
            ch,
            fill(p, slowest),
            esc(&tip)
        );
        if cw >= 24.0 {
            // White on the dark fills, ink on the pale ones (slow recoveries, healed late).
            let late = p.recovered_seeds == 0 && p.late_seeds > 0;
            let dark = !late && (p.share() < 1.0 || p.recovery_s.unwrap_or(0.0) < 0.5 * slowest);
            let _ = write!(
                s,
                r#"<text class="cl{}" x="{:.1}" y="{:.1}">{}</text>"#,
                if dark { " on" } else { "" },
                x + cw / 2.0,
                y + ch / 2.0 + 4.0,
                esc(&label(p))
            );
        }
    }
    // Axis labels: every value if they fit, else about ten.
    let every = nx.div_ceil(((w - LABEL_W) / 44.0) as usize).max(1);
    let base = top + ny as f64 * ch;
    for (i, v) in x_axis.values.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = write!(
            s,
            r#"<text class="xt" x="{:.1}" y="{:.1}">{}</text>"#,
            LABEL_W + (i as f64 + 0.5) * cw,
            base + 14.0,
            short(*v)
        );
    }
    let _ = write!(
        s,
        r#"<text class="xl" x="{:.1}" y="{:.1}">{}</text>"#,
        LABEL_W + (w - LABEL_W) / 2.0,
        base + 32.0,
        esc(&x_axis.path)
    );
    match y_axis {
        Some(a) => {
            for (i, v) in a.values.iter().enumerate() {
                let (_, y) = cell_at(0, i);
                let _ = write!(
                    s,
                    r#"<text class="yt" x="{:.1}" y="{:.1}">{}</text>"#,
                    LABEL_W - 6.0,
                    y + ch / 2.0 + 4.0,
                    short(*v)
                );
            }
            let _ = write!(
                s,
                r#"<text class="yl" x="4" y="{:.1}">{} ↑</text>"#,
                top - 6.0,
                esc(&a.path)
            );
        }
        None => {
            let _ = write!(
                s,
                r#"<text class="yl" x="4" y="{:.1}">verdict</text>"#,
                top + ch / 2.0 + 4.0
            );
        }
    }
    // The boundary: a dashed mark per line of the grid, joined across lines.
    let mut marks = Vec::new();
    for b in bounds {
        let Some(pos) = b.value.and_then(|v| position(&x_axis.values, v)) else { continue };
        let iy = match y_axis {
            Some(a) => match b.at.get(&a.path).and_then(|v| a.values.iter().position(|x| x == v)) {
                Some(i) => i,
                None => continue,
            },
            None => 0,
        };
        let x = LABEL_W + (pos + 0.5) * cw;
        let (_, y) = cell_at(0, iy);
        marks.push((x, y, b.value.unwrap_or(0.0)));
    }
    for (x, y, v) in &marks {
        let y0 = if y_axis.is_none() { y - 14.0 } else { *y };
        let _ = write!(
            s,
            r#"<line class="edge" x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{:.1}"/>"#,
            y + ch
        );
        if y_axis.is_none() {
            let _ = write!(
                s,
                r#"<text class="mk" x="{:.1}" y="{:.1}">≈ {}</text>"#,
                x + 4.0,
                top - 6.0,
                short(*v)
            );
        }
    }
    s.push_str("</svg>");
    s
}

fn legend(slowest: f64) -> String {
    let swatch = |c: &str, t: &str| {
        format!(r#"<span><i class="sw" style="background:{c}"></i>{}</span>"#, esc(t))
    };
    let slow = format!("#{:02X}{:02X}{:02X}", SLOW.0 as u8, SLOW.1 as u8, SLOW.2 as u8);
    let fast = format!("#{:02X}{:02X}{:02X}", FAST.0 as u8, FAST.1 as u8, FAST.2 as u8);
    format!(
        r#"<p class="legend phase-key">{}{}{}{}{}<span><i class="sw edge-key"></i>boundary (half the seeds recover)</span></p>"#,
        swatch(&fast, "recovered at once (label: median recovery time)"),
        swatch(&slow, &format!("recovered slowly ({} or more)", table::secs(slowest))),
        swatch(MIXED, "some seeds recovered (label: how many)"),
        swatch(LATE, "healed late: most requests after the fault lost (run longer to judge)"),
        swatch(STUCK, "stays down in every seed (✗)"),
    )
}

fn points_table(sw: &Sweep) -> String {
    // The very cells of the terminal table.
    let rows = crate::sweep::text::rows(sw);
    let mut s = String::from("<table><thead><tr>");
    for h in &rows[0] {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for row in &rows[1..] {
        s.push_str("<tr>");
        for cell in row {
            let _ = write!(s, "<td>{}</td>", esc(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

fn how_to_read() -> String {
    let items = [
        (
            "Hidden capacity",
            "Bronson et al. (HotOS 2021) call a system metastable when a trigger pushes it into a \
             bad state that sustains itself after the trigger ends. The hidden capacity is the \
             load below which it heals by itself: the boundary of this diagram.",
        ),
        (
            "Recovered",
            "Goodput per second back to 90 % of its pre-fault level and staying there to the end \
             of the run, and most requests after the fault (goodput after ≥ half of before) \
             answered. A point recovers when most of its seeds do.",
        ),
        (
            "The boundary",
            "Where the share of seeds that recover crosses one half, interpolated between grid \
             points. Its uncertainty runs from the last point where every seed recovered to the \
             first where none did.",
        ),
        (
            "Repeat one point",
            "Every seed of every point is in sweep.json; `seawall simulate SCENARIO --set \
             PATH=VALUE --seed SEED --policy NAME` runs it again, figure for figure.",
        ),
    ];
    let mut s = String::from(r#"<aside class="howto"><h2 class="sec">How to read this</h2><dl>"#);
    for (k, v) in items {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl></aside>");
    s
}
