//! `tidelog-bench`: load any Kafka-compatible broker with librdkafka and print every
//! figure next to this machine's ceilings measured in the same run.

mod broker;
mod ceilings;
mod cli;
mod cluster;
mod commands;
mod compare;
mod load;
mod plot;
mod procfs;
mod report;
mod stats;
mod targets;
mod targets_cluster;
mod targets_fleet;
mod targets_load;
mod targets_scale;
mod tls_cost;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = cli::Args::parse();
    commands::run(args)
}
