//! `tidelog produce` (being written).

#[derive(clap::Args)]
pub(crate) struct ProduceArgs {}

pub(crate) fn run(_args: ProduceArgs) -> anyhow::Result<()> {
    anyhow::bail!("tidelog produce is not implemented yet")
}
