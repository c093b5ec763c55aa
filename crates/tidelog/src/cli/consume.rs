//! `tidelog consume` (being written).

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {}

pub(crate) fn run(_args: ConsumeArgs) -> anyhow::Result<()> {
    anyhow::bail!("tidelog consume is not implemented yet")
}
