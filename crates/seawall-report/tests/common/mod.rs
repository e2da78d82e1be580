//! Synthetic results for the report tests: a retry storm that stays down and its cure.

#![allow(dead_code, unreachable_pub)]

use seawall_report::{Fault, Results, Run, Series, Source};

/// A run of 60 s at 280 rps with an outage from 10 s to 20 s, in one of two shapes: `storm`
/// (goodput stays near zero after the fault, the bottom tier sees 3×3 attempts) or the cure
/// (recovers two seconds after the fault, budgets refuse retries).
pub fn run(policy: &str, storm: bool) -> Run {
    let n = 60;
    let t: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let faulty = |i: usize| if storm { i >= 10 } else { (10..22).contains(&i) };
    let edge = vec![280.0; n];
    let good: Vec<f64> = (0..n)
        .map(|i| match (faulty(i), storm) {
            (false, _) => 278.0,
            (true, true) => 0.0,
            (true, false) if i < 20 => 0.0,
            (true, false) => 140.0,
        })
        .collect();
    let amp = |i: usize| match (faulty(i), storm) {
        (true, true) => 9.0,
        (true, false) => 1.1,
        _ => 1.0,
    };
    let bottom: Vec<f64> = (0..n).map(|i| 280.0 * amp(i)).collect();
    let mid: Vec<f64> = (0..n).map(|i| 280.0 * amp(i).sqrt()).collect();
    let series = Series {
        t,
        edge_rps: edge.clone(),
        goodput_rps: good,
        bottom_attempts_rps: bottom.clone(),
        tier_attempts_rps: vec![edge, mid, bottom],
        queue_age_s: (0..n).map(|i| if faulty(i) && storm { 4.0 } else { 0.05 }).collect(),
        budget_refusals_rps: (0..n)
            .map(|i| if faulty(i) && !storm { 250.0 } else { 0.0 })
            .collect(),
        shed_rps: (0..n).map(|i| if faulty(i) && !storm { 30.0 } else { 0.0 }).collect(),
        breaker_open: vec![0.0; n],
    };
    let mut run = Run::judged(policy, series, Some(&fault()));
    run.attempts_per_call = if storm { 7.4 } else { 1.04 };
    run.wasted_work = if storm { 0.62 } else { 0.03 };
    run.events = 1_000_000;
    run
}

/// The fault of the synthetic runs.
pub fn fault() -> Fault {
    Fault { kind: "outage of db for 10 s".into(), start_s: 10.0, end_s: 20.0 }
}

/// The bronson-like scenario with a storm (`naive`) and a cure (`seawall`).
pub fn results() -> Results {
    Results {
        scenario: "bronson".into(),
        description: "A 10 s database outage at 280 QPS: one retry after a 1 s timeout keeps it \
                      down."
            .into(),
        seed: 42,
        source: Source::Simulation,
        duration_s: 60.0,
        fault: Some(fault()),
        tiers: vec!["app".into(), "service".into(), "db".into()],
        runs: vec![run("naive", true), run("seawall", false)],
    }
}

/// Checks that every opened tag is closed, in order (void elements and `/>` excepted), and
/// returns the names of the opened tags in document order.
pub fn balanced_tags(html: &str) -> Result<Vec<String>, String> {
    const VOID: [&str; 6] = ["meta", "br", "hr", "img", "input", "link"];
    let mut stack: Vec<String> = Vec::new();
    let mut opened = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
            if top != name {
                return Err(format!("<{top}> closed by </{name}>"));
            }
            continue;
        }
        let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        if name.is_empty() {
            return Err(format!("bad tag <{tag}>"));
        }
        opened.push(name.clone());
        if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    if stack.is_empty() { Ok(opened) } else { Err(format!("unclosed: {stack:?}")) }
}
