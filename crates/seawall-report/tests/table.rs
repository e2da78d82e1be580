//! The terminal table: one aligned row per policy, within 100 columns.

mod common;

use common::{results, run};
use seawall_report::render_table;

#[test]
fn one_row_per_policy_with_the_headline_numbers() {
    let t = render_table(&results());
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(lines[0].starts_with("policy"));
    assert!(lines[1].starts_with("naive "));
    assert!(lines[1].contains(" no "));
    assert!(lines[1].contains("9.0×"));
    assert!(lines[1].contains("7.40"));
    assert!(lines[2].starts_with("seawall "));
    assert!(lines[2].contains("yes, 2.0 s"));
    assert!(lines[2].contains("1.1×"));
}

#[test]
fn columns_line_up_and_fit_in_100() {
    let mut r = results();
    r.runs.push(run("a-policy-with-a-very-long-name-indeed", true));
    let t = render_table(&r);
    let widths: Vec<usize> = t.lines().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|w| *w <= 100), "{t}");
    // Right-aligned numbers: every row ends at the same column.
    assert!(widths.windows(2).all(|w| w[0] == w[1]), "{t}");
    assert!(t.contains('…'));
}

#[test]
fn degenerate_inputs() {
    let mut r = results();
    r.runs.clear();
    assert_eq!(render_table(&r).lines().count(), 1);
    let mut r = results();
    r.fault = None;
    r.runs[0].peak_amplification = f64::NAN;
    r.runs[0].policy = "line\nbreak".into();
    let t = render_table(&r);
    assert_eq!(t.lines().count(), 3);
    assert!(t.contains("line?break"));
    assert!(t.contains('—'));
}

#[test]
fn hedging_shows_only_when_a_run_hedges() {
    let mut r = results();
    assert_eq!(seawall_report::render_hedging(&r), "");
    assert!(!seawall_report::render_html(&r).contains("Hedging"));
    r.runs[1].hedging.push(seawall_report::Hedging {
        caller: "edge".into(),
        tier: "db".into(),
        sent: 359,
        won: 223,
        cancelled: 120,
        refused: 7,
    });
    let t = seawall_report::render_hedging(&r);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(lines[1].starts_with("policy") && lines[1].ends_with("refused"), "{t}");
    assert!(lines[2].starts_with("seawall  edge → db"), "{t}");
    assert!(lines[2].ends_with("359  223        120        7"), "{t}");
    let html = seawall_report::render_html(&r);
    assert!(html.contains("<h2 class=\"sec\">Hedging</h2>"));
    assert!(html.contains("<td>edge → db</td><td>359</td><td>223</td><td>120</td><td>7</td>"));
    // The summary table is the same as without hedging.
    assert_eq!(render_table(&r).lines().count(), 3);
}
