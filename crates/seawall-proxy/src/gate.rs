//! The one place a decision becomes waiting or refusing, for both modes.

use std::time::Duration;

use super::Shared;
use super::fault::FailMode;
use super::schedule::{Action, Draws};

/// Decisions in a row one request may go through (a hold that ends into another hold…).
const MAX_ROUNDS: usize = 16;

/// The outcome of passing the faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// Forward it (any delay already waited).
    Pass,
    /// Refuse it this way.
    Refuse(FailMode),
}

/// How often a held request looks whether its hang was cleared (by the control API).
const RECHECK: Duration = Duration::from_millis(50);

/// Decides, waits out delays and holds (bounded), and counts what a fault acted on: each
/// refusal, each hold (once, when it starts), each delayed request.
///
/// A held request stays held while any `hang` is active, up to the bound of the hold that
/// caught it, and is released within [`RECHECK`] of the hang ending or being cleared; then it
/// is decided afresh (it may meet a `fail` that started meanwhile).
pub(super) async fn pass(shared: &Shared, draws: &mut impl Draws) -> Gate {
    for _ in 0..MAX_ROUNDS {
        match shared.faults.decide(shared.now(), draws) {
            Action::Pass { delay } => {
                if !delay.is_zero() {
                    shared.stats.faulted(shared.now(), "slow");
                    tokio::time::sleep(delay).await;
                }
                return Gate::Pass;
            }
            Action::Fail { mode, by } => {
                shared.stats.faulted(shared.now(), by);
                return Gate::Refuse(shared.fail_mode(mode));
            }
            Action::Hold { until, give_up } => {
                let Ok(_held) = shared.held.clone().try_acquire_owned() else {
                    shared.stats.rejected("held_queue_full");
                    return Gate::Refuse(shared.fail_mode(FailMode::Status));
                };
                shared.stats.faulted(shared.now(), "hang");
                let mut target = until.min(give_up);
                // Bounded by `give_up`: each turn sleeps, and time moves on.
                while shared.now() < target {
                    tokio::time::sleep(shared.until(target).min(RECHECK)).await;
                    match shared.faults.hang_until(shared.now()) {
                        Some(u) => target = u.min(give_up),
                        None => break,
                    }
                }
                if shared.now() >= give_up && shared.faults.hang_until(shared.now()).is_some() {
                    return Gate::Refuse(FailMode::Reset);
                }
            }
        }
    }
    Gate::Pass
}
