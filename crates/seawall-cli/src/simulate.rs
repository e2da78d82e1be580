//! `seawall simulate` (being built; see its issue).

use std::process::ExitCode;

/// Arguments of `seawall simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`seawall simulate` is not built yet")
}
