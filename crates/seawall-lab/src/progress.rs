//! What a lab run tells its caller as it goes: an enum, matched on, never strings parsed.

use std::time::Duration;

use crate::run::StackInfo;

/// One step of a lab run (the synthetic lab or the lab on the user's stack).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum LabProgress<'a> {
    /// A configuration starts (`index` of `of`, 0-based); its load will last `duration`.
    Starting {
        /// The configuration's name (`baseline`, `seawall`, or a `--config NAME`).
        config: &'a str,
        /// Its place in the run.
        index: usize,
        /// How many configurations the run has.
        of: usize,
        /// How long its load lasts.
        duration: Duration,
    },
    /// The synthetic stack is up: its nodes' URLs (also written to the nodes file).
    StackUp(&'a StackInfo),
    /// The user's stack answers at the target: the load starts.
    TargetUp {
        /// The configuration.
        config: &'a str,
        /// The edge URL.
        target: &'a str,
        /// The process group of the configuration's command, if it has one.
        pgid: Option<u32>,
        /// How long the stack took to accept connections.
        ready_in: Duration,
    },
    /// A configuration's run is over and everything it started has stopped.
    Finished {
        /// The configuration.
        config: &'a str,
        /// Its run, judged ([`seawall_report::Run::sentence`] says the verdict).
        run: &'a seawall_report::Run,
    },
}
