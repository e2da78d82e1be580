//! The virtual lab (`crate::vlab`): the lab's own tiers on a paused clock, in memory.

use std::time::Instant;

use seawall_lab::vlab::{self, VirtualParams};
use seawall_lab::{LabParams, Launcher, run_lab};

fn run(params: &LabParams) -> seawall_lab::LabOutcome {
    let rt = vlab::runtime().unwrap();
    rt.block_on(run_lab(params, &Launcher::Virtual(VirtualParams::default()), |_| {})).unwrap()
}

#[test]
fn the_default_lab_runs_virtually_with_its_verdicts() {
    let params = LabParams::default();
    let wall = Instant::now();
    let out = run(&params);
    let took = wall.elapsed();
    eprintln!("{}", out.figures_table());
    for r in &out.results.runs {
        eprintln!("{}: {} good {:?}", r.policy, r.sentence(), r.series.goodput_rps);
    }
    eprintln!("wall {took:?} for {:?} simulated per configuration", params.duration);
}
