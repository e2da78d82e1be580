//! The HTML report: structure, escaping, determinism, and no panic on degenerate input.

mod common;

use common::{balanced_tags, results, run};
use seawall_report::html::render_html_compare;
use seawall_report::{Results, Run, Series, Source, Verdict, render_html};

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn the_page_is_well_formed_and_self_contained() {
    let html = render_html(&results());
    assert!(html.starts_with("<!doctype html>"));
    let tags = balanced_tags(&html).unwrap();
    assert!(tags.iter().any(|t| t == "svg"));
    for outside in ["http://", "https://", "<script", "src=", "<link"] {
        assert!(!html.contains(outside), "page refers outside itself: {outside}");
    }
}

#[test]
fn one_column_per_policy_with_its_verdict() {
    let html = render_html(&results());
    assert_eq!(count(&html, r#"class="colhead"#), 2);
    assert!(html.contains("repeat(2, minmax(0, 1fr))"));
    assert!(html.contains("stays down — goodput 0\u{a0}% after the fault"), "{html}");
    assert!(html.contains("recovered 2.0\u{a0}s after the fault"));
    // Peak amplification of the storm (9×) and of the cure (1.1×), and wasted work.
    assert!(html.contains("<dd>9.0×</dd>"));
    assert!(html.contains("<dd>1.1×</dd>"));
    assert!(html.contains("<dd>62\u{a0}%</dd>"));
    assert!(html.contains("db took 9.0× the edge&#39;s requests at the peak"));
    assert!(html.contains("db took at most 1.1× the edge&#39;s requests"));
    let naive = html.find("<h2>naive").unwrap();
    let seawall = html.find("<h2>seawall").unwrap();
    assert!(naive < seawall, "columns keep the order of the runs");
}

#[test]
fn the_fault_is_shaded_on_every_chart() {
    let html = render_html(&results());
    let charts = count(&html, r#"<figure class="cell">"#);
    // Load, tiers, amplification, queue age, refusals; the breaker never opened: no row.
    assert_eq!(charts, 5 * 2);
    assert_eq!(count(&html, r#"<rect class="fault""#), charts);
    assert!(!html.contains("open circuit breaker"));
    assert!(html.contains("outage of db for 10 s"));
    assert!(html.contains("recovered +2.0 s"), "the recovery is marked on the chart");
}

#[test]
fn tiers_are_named_in_the_legend_and_header() {
    let html = render_html(&results());
    assert!(html.contains("app → service → db"));
    for tier in ["app", "service", "db"] {
        assert!(html.contains(&format!("</svg>{tier}</span>")), "legend lacks {tier}");
    }
}

#[test]
fn every_name_from_the_results_is_escaped() {
    let mut r = results();
    let evil = r#"<b>"x" & 'y'</b>"#;
    r.scenario = evil.into();
    r.description = evil.into();
    r.tiers[0] = evil.into();
    r.runs[0].policy = evil.into();
    r.fault.as_mut().unwrap().kind = evil.into();
    let html = render_html(&r);
    assert!(!html.contains("<b>"));
    assert!(html.contains("&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"));
    balanced_tags(&html).unwrap();
}

#[test]
fn same_results_same_bytes() {
    let r = results();
    assert_eq!(render_html(&r), render_html(&r.clone()));
    let json = r.to_json();
    let back: Results = serde_json::from_str(&json).unwrap();
    assert_eq!(render_html(&back), render_html(&r));
}

#[test]
fn summary_table_shows_the_terminal_numbers() {
    let html = render_html(&results());
    assert!(html.contains("<td>yes, 2.0 s</td>"));
    assert!(html.contains("<td>no</td>"));
    assert!(html.contains("<td>7.40</td>"));
    assert!(html.contains("How to read this"));
}

#[test]
fn degenerate_inputs_render() {
    let mut r = results();
    r.runs.clear();
    let html = render_html(&r);
    balanced_tags(&html).unwrap();
    assert!(html.contains("no runs"));

    let mut r = results();
    r.fault = None;
    r.tiers.clear();
    r.duration_s = f64::NAN;
    let s = &mut r.runs[0].series;
    s.goodput_rps.truncate(3);
    s.edge_rps[5] = f64::INFINITY;
    s.bottom_attempts_rps[6] = f64::NAN;
    s.queue_age_s.clear();
    s.tier_attempts_rps.push(vec![-1.0; 100]);
    r.runs[1].series = Series::default();
    r.runs[1].peak_amplification = f64::NAN;
    r.runs[1].verdict = Verdict::Recovered { recovery_s: f64::INFINITY };
    let html = render_html(&r);
    balanced_tags(&html).unwrap();
    assert_eq!(count(&html, r#"<rect class="fault""#), 0);
    assert!(html.contains("tier 4"), "unnamed tiers get a number");
}

#[test]
fn six_policies_make_six_columns() {
    let mut r = results();
    r.runs = (0..6).map(|i| run(&format!("p{i}"), i % 2 == 0)).collect();
    let html = render_html(&r);
    assert_eq!(count(&html, r#"class="colhead"#), 6);
    balanced_tags(&html).unwrap();
}

#[test]
fn comparison_puts_prediction_beside_measurement() {
    let mut lab = results();
    lab.source = Source::Lab;
    lab.runs[1].attempts_per_call = 1.2;
    let sim = results();
    let html = render_html_compare(&lab, &sim);
    balanced_tags(&html).unwrap();
    assert_eq!(count(&html, r#"class="colhead"#), 4);
    let tags: Vec<usize> = ["<h2>naive<span class=\"tag\">lab", "<h2>naive<span class=\"tag\">sim"]
        .iter()
        .map(|t| html.find(t).unwrap())
        .collect();
    assert!(tags[0] < tags[1]);
    assert!(html.contains("Measured vs predicted"));
    assert!(html.contains("<td>+0.16</td>"), "gap in attempts per call");
    assert!(html.contains("<td>+0 pp</td>"));
    assert_eq!(render_html_compare(&lab, &sim), render_html_compare(&lab, &sim));
}

#[test]
fn comparison_keeps_unmatched_runs() {
    let lab = results();
    let mut sim = results();
    sim.runs.truncate(1);
    sim.runs[0].policy = "other".into();
    sim.runs.push(run("extra", false));
    let html = render_html_compare(&lab, &sim);
    balanced_tags(&html).unwrap();
    // naive+other (by position? no: "other" is unclaimed at index 0), seawall+extra, in order.
    assert_eq!(count(&html, r#"class="colhead"#), 4);
}

#[test]
fn verdicts_in_plain_words() {
    let mut r = results();
    r.runs[1].verdict = Verdict::Recovered { recovery_s: 0.0 };
    let html = render_html(&r);
    assert!(html.contains("recovered as soon as the fault ended"));
    assert!(html.contains("stays down — goodput 0\u{a0}% after the fault"), "the storm");
    // Without a fault there is nothing to recover from, and the page says so.
    r.fault = None;
    for run in &mut r.runs {
        *run = Run::judged(run.policy.clone(), run.series.clone(), None);
    }
    let html = render_html(&r);
    assert_eq!(count(&html, "not judged: no fault was injected"), 2, "{html}");
    assert!(html.contains("none injected"));
}

/// Tables the shared results have no field for (a load test's latency) come after the summary,
/// every text escaped; with none the page is `render_html`'s, byte for byte. Turns red if the
/// cells or the heading are written raw, or the tables are left out.
#[test]
fn extra_tables_follow_the_summary_escaped() {
    use seawall_report::{ExtraTable, render_html_with};
    let r = results();
    assert_eq!(render_html_with(&r, &[]), render_html(&r));
    let t = ExtraTable {
        title: "Latency <ms>".into(),
        note: "from the \"send\"".into(),
        header: vec!["t".into(), "p50 & p99".into()],
        rows: vec![vec!["0".into(), "<b>1.5</b>".into()]],
    };
    let html = render_html_with(&r, &[t]);
    balanced_tags(&html).unwrap();
    assert!(html.contains(r#"<h2 class="sec extra">Latency &lt;ms&gt;</h2>"#), "{html}");
    assert!(html.contains("from the &quot;send&quot;"));
    assert!(html.contains("<th>p50 &amp; p99</th>"));
    assert!(html.contains("<td>&lt;b&gt;1.5&lt;/b&gt;</td>") && !html.contains("<b>1.5"));
    assert!(html.find("Summary").unwrap() < html.find("Latency &lt;ms&gt;").unwrap());
}
