//! `seawall audit` (being built; see its issue).

use std::process::ExitCode;

/// Arguments of `seawall audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`seawall audit` is not built yet")
}
