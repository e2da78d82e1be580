//! `seawall escape` (being built; see issue 8).

use std::process::ExitCode;

/// Arguments of `seawall escape`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`seawall escape` is not built yet")
}
