//! `seawall lab` (being built; see its issue).

use std::process::ExitCode;

/// Arguments of `seawall lab`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Arguments of the hidden `seawall lab-node`.
#[derive(Debug, clap::Args)]
pub(crate) struct NodeArgs {}

pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`seawall lab` is not built yet")
}

pub(crate) fn run_node(_args: NodeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`seawall lab-node` is not built yet")
}
