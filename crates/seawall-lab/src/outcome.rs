//! The whole lab: every configuration in turn, and the report of all of them.

use seawall_report::Results;

use crate::LabError;
use crate::config::LabParams;
use crate::launch::Launcher;
use crate::pg::{PgLab, PgSample};
use crate::progress::LabProgress;
use crate::report::{LabFigures, to_results, to_run};
use crate::run::run_stack;

/// Pause between configurations.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// What a lab run produced.
#[derive(Debug, Clone)]
pub struct LabOutcome {
    /// The shared results (one run per configuration, in the order asked).
    pub results: Results,
    /// The lab's own figures, one per run, same order.
    pub figures: Vec<LabFigures>,
    /// The simulator's prediction for the same parameters (the `sim` column), same runs.
    pub predicted: Results,
    /// With `--backend`: each run's `pg_stat_activity` readings, one a second (else empty).
    pub postgres: Vec<Vec<PgSample>>,
}

impl LabOutcome {
    /// The lab's figures as a plain-text table, one row per configuration.
    pub fn figures_table(&self) -> String {
        // One row per figure, one column per configuration: fits 100 columns however many
        // figures the lab measures.
        let runs: Vec<(&seawall_report::Run, &LabFigures)> =
            self.results.runs.iter().zip(&self.figures).collect();
        let row = |name: &str, cell: &dyn Fn(&LabFigures) -> String| -> Vec<String> {
            std::iter::once(name.to_string()).chain(runs.iter().map(|(_, f)| cell(f))).collect()
        };
        let mut header = vec!["lab figure".to_string()];
        header.extend(runs.iter().map(|(r, _)| r.policy.clone()));
        let rows = vec![
            header,
            // "≥": the machine capped the storm (see the description's words).
            row("attempts per edge request (fault)", &|f| {
                let mark = if f.saturation.is_lower_bound() { "≥" } else { "" };
                format!("{mark}{:.2}", f.amplification_during)
            }),
            row("goodput / s", &|f| format!("{:.1}", f.goodput_rps)),
            row("offered / s", &|f| format!("{:.1}", f.offered_rps)),
            row("budget refusals", &|f| f.budget_refusals.to_string()),
            row("shed", &|f| f.shed.to_string()),
            row("generator lag, worst (s)", &|f| format!("{:.3}", f.max_lag_s)),
            row("cpu, mean", &|f| {
                f.saturation.cpu_mean.map_or("—".into(), |c| format!("{:.0} %", c * 100.0))
            }),
            row("timers late, worst", &|f| {
                f.saturation.timer_late_s.map_or("—".into(), |t| format!("{:.1} ms", t * 1000.0))
            }),
            row("client attempts edge/gateway/order", &|f| {
                let a = f.client_attempts;
                format!("{}/{}/{}", a[0], a[1], a[2])
            }),
            row("pg copies / oldest (s)", &|f| {
                f.pg_peak
                    .map_or("—".into(), |p| format!("{}/{:.1}", p.running_copies, p.oldest_s))
            }),
        ];
        seawall_report::table::columns(&rows, 1)
    }

    /// Measured vs predicted (see [`crate::sim::gap_table`]).
    pub fn gap_table(&self) -> String {
        crate::sim::gap_table(&self.results, &self.predicted)
    }
}

/// Runs every configuration of `params` in turn (validated first), starting nodes with
/// `launcher`. `progress` is told when each configuration starts, when its stack is up and when it is
/// done.
pub async fn run_lab(
    params: &LabParams,
    launcher: &Launcher,
    mut progress: impl FnMut(&LabProgress<'_>),
) -> Result<LabOutcome, LabError> {
    params.validate()?;
    // Predicted first: it takes well under a second, and a parameter the simulator cannot
    // express is better found before a minute of lab time.
    let predicted = crate::sim::predict(params)?;
    let pg = match &params.backend {
        Some(url) => Some(PgLab::setup(url, params.service_time()).await?),
        None => None,
    };
    let measured = run_all(params, launcher, &mut progress, pg.as_ref()).await;
    if let Some(pg) = &pg {
        // Dropped even when a run failed; a teardown error only matters if the runs succeeded.
        let down = pg.teardown().await;
        if measured.is_ok() {
            down?;
        }
    }
    let (runs, figures, postgres) = measured?;
    let mut results = to_results(params, runs);
    if let Launcher::Virtual(v) = launcher {
        results.description = format!(
            "virtual lab (the same tiers in memory on a paused clock, links {} µs one way): {}",
            v.latency.as_micros(),
            results.description
        );
    }
    if pg.is_some() {
        results.description.push_str(&pg_summary(&results, &figures));
    }
    if figures.iter().any(|f| f.saturation.is_lower_bound()) {
        results.description.push('.');
    }
    for (r, f) in results.runs.iter().zip(&figures) {
        results.description.push_str(&f.saturation.sentence(&r.policy));
    }
    Ok(LabOutcome { results, figures, predicted, postgres })
}

type Measured = (Vec<seawall_report::Run>, Vec<LabFigures>, Vec<Vec<PgSample>>);

async fn run_all(
    params: &LabParams,
    launcher: &Launcher,
    progress: &mut impl FnMut(&LabProgress<'_>),
    pg: Option<&PgLab>,
) -> Result<Measured, LabError> {
    let (mut runs, mut figures, mut postgres) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &stack) in params.stacks.iter().enumerate() {
        if i > 0 {
            // Let the previous stack's sockets and threads wind down before measuring the next.
            tokio::time::sleep(SETTLE).await;
        }
        let (config, of) = (stack.as_str(), params.stacks.len());
        progress(&LabProgress::Starting { config, index: i, of, duration: params.duration });
        let m = match launcher {
            Launcher::Virtual(v) => crate::vlab::run_stack(params, stack, *v).await?,
            _ => {
                run_stack(params, stack, launcher, pg, &mut |info| {
                    progress(&LabProgress::StackUp(info))
                })
                .await?
            }
        };
        let (run, f) = to_run(params, &m);
        progress(&LabProgress::Finished { config, run: &run });
        runs.push(run);
        figures.push(f);
        postgres.push(m.pg);
    }
    Ok((runs, figures, postgres))
}

/// "; pg_stat_activity during the fault: baseline 4 copies, oldest 10.0 s; …" for the report.
fn pg_summary(results: &Results, figures: &[LabFigures]) -> String {
    let mut s = String::from("; pg_stat_activity during the fault (peak):");
    for (r, f) in results.runs.iter().zip(figures) {
        if let Some(p) = f.pg_peak {
            s.push_str(&format!(
                " {} {} running copies, oldest {:.1} s;",
                r.policy, p.running_copies, p.oldest_s
            ));
        }
    }
    s
}

/// [`run_lab`] on a runtime of its own, for a binary: returns `Ok(None)` if interrupted by
/// Ctrl-C (every node is stopped either way).
pub fn run_lab_blocking(
    params: &LabParams,
    launcher: &Launcher,
    progress: impl FnMut(&LabProgress<'_>),
) -> Result<Option<LabOutcome>, LabError> {
    if let Launcher::Virtual(_) = launcher {
        // One thread and a paused clock: deterministic, and as fast as the CPU allows.
        return crate::vlab::runtime()?.block_on(run_lab(params, launcher, progress)).map(Some);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        tokio::select! {
            r = run_lab(params, launcher, progress) => r.map(Some),
            // Dropping the lab future drops every node handle: children are killed.
            _ = tokio::signal::ctrl_c() => Ok(None),
        }
    })
}
