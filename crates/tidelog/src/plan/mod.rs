//! `tidelog plan` (being written).

#[derive(clap::Args)]
pub(crate) struct PlanArgs {}

pub(crate) fn run(_args: PlanArgs) -> anyhow::Result<()> {
    anyhow::bail!("tidelog plan is not implemented yet")
}
