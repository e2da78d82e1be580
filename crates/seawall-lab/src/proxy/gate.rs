//! The one place a decision becomes waiting or refusing, for both modes.

use seawall::rng::SeededRng;

use super::Shared;
use super::fault::FailMode;
use super::schedule::Action;

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

/// Decides, waits out delays and holds (bounded), and counts what a fault refused.
pub(super) async fn pass(shared: &Shared, rng: &mut SeededRng) -> Gate {
    for _ in 0..MAX_ROUNDS {
        match shared.faults.decide(shared.now(), rng) {
            Action::Pass { delay } => {
                if !delay.is_zero() {
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
                if give_up < until {
                    tokio::time::sleep(shared.until(give_up)).await;
                    shared.stats.faulted(shared.now(), "hang");
                    return Gate::Refuse(FailMode::Reset);
                }
                tokio::time::sleep(shared.until(until)).await;
            }
        }
    }
    Gate::Pass
}
