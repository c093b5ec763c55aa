//! `tidelog serve` (being written).

#[derive(clap::Args)]
pub(crate) struct ServeArgs {}

pub(crate) fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("tidelog serve is not implemented yet")
}
