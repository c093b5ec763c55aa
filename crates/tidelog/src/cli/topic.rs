//! `tidelog topic` (being written).

#[derive(clap::Args)]
pub(crate) struct TopicArgs {}

pub(crate) fn run(_args: TopicArgs) -> anyhow::Result<()> {
    anyhow::bail!("tidelog topic is not implemented yet")
}
