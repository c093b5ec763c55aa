//! `tidelog group`: list, describe (members, assignment, lag), reset offsets, delete,
//! and group configs (`group config get|set|delete`).

mod config;
mod describe;

use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use serde_json::json;
use tidelog_client::{Client, OffsetSpec};

use super::output::{print_json, OutputArgs};
use super::when::{now_ms, parse_time};
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct GroupArgs {
    #[command(subcommand)]
    command: GroupCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum GroupCommand {
    /// List groups with their state.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Members, assignments, and per partition: committed offset, log end, lag in
    /// messages, time lag (age of the oldest unread record), drain time (lag / consumed
    /// rate), the lag trend, and the time left before retention deletes unread records.
    Describe {
        /// Group id.
        group: String,
        /// How long to watch commits to measure the consumed rate and the lag trend.
        /// Rates are taken between the commits seen, and need two: keep it at least
        /// twice the consumers' auto.commit.interval.ms (5 s by default).
        #[arg(long, default_value_t = 15_000, value_name = "MS")]
        window_ms: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Move a group's committed offsets for one topic (refused while it has members).
    ResetOffsets {
        /// Group id.
        group: String,
        /// The topic whose partitions are reset.
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Print the new offsets without committing them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete a group without members and its committed offsets.
    Delete {
        /// Group id.
        group: String,
    },
    /// A group's configs (Kafka's GROUP config resource: consumer.session.timeout.ms,
    /// consumer.heartbeat.interval.ms, the share.* ones), as `kafka-configs
    /// --entity-type groups` shows and alters them.
    Config {
        #[command(subcommand)]
        command: config::GroupConfigCommand,
    },
}

#[derive(clap::Args)]
#[group(required = true, multiple = false)]
pub(super) struct ResetTarget {
    /// The log start of each partition.
    #[arg(long)]
    to_earliest: bool,
    /// The log end of each partition (skip everything unread).
    #[arg(long)]
    to_latest: bool,
    /// This offset in every partition (clamped to what the log holds).
    #[arg(long, value_name = "OFFSET")]
    to_offset: Option<i64>,
    /// The first record at or after this time: ms since the epoch, RFC 3339, or an age like -15m.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_to_time)]
    to_time: Option<i64>,
}

/// `--to-time` as ms since the epoch; an age (`-15m`) counts back from now.
fn parse_to_time(s: &str) -> Result<i64, String> {
    parse_time(s, now_ms())
}

pub(crate) fn run(args: GroupArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            GroupCommand::List { output } => list(&mut client, output).await?,
            GroupCommand::Describe {
                group,
                window_ms,
                output,
            } => {
                let window = Duration::from_millis(window_ms);
                describe::describe(&mut client, &group, window, output).await?;
            }
            GroupCommand::ResetOffsets {
                group,
                topic,
                to,
                dry_run,
            } => reset(&mut client, &group, &topic, &to, dry_run).await?,
            GroupCommand::Delete { group } => {
                client.delete_group(&group).await?;
                println!("deleted group {group}");
            }
            GroupCommand::Config { command } => config::run(&mut client, command).await?,
        }
        Ok(())
    })
}

async fn list(client: &mut Client, output: OutputArgs) -> anyhow::Result<()> {
    let groups = client.list_groups().await?;
    if output.json() {
        let groups: Vec<_> = groups
            .iter()
            .map(|g| {
                json!({
                    "group": g.group_id, "state": g.state,
                    "protocol_type": g.protocol_type, "group_type": g.group_type,
                })
            })
            .collect();
        return print_json(&json!({ "groups": groups }));
    }
    if groups.is_empty() {
        eprintln!("no groups");
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "GROUP\tSTATE\tTYPE\tPROTOCOL")?;
    for g in groups {
        let kind = if g.protocol_type.is_empty() {
            "-"
        } else {
            &g.protocol_type
        };
        let protocol = if g.group_type.is_empty() {
            "classic"
        } else {
            &g.group_type
        };
        writeln!(out, "{}\t{}\t{kind}\t{protocol}", g.group_id, g.state)?;
    }
    Ok(())
}

async fn reset(
    client: &mut Client,
    group: &str,
    topic: &str,
    to: &ResetTarget,
    dry_run: bool,
) -> anyhow::Result<()> {
    let d = client.describe_group(group).await?;
    if !d.members.is_empty() {
        bail!(
            "group {group} has {} active members; stop its consumers before resetting offsets",
            d.members.len()
        );
    }
    let partitions = client.partition_count(topic, false).await?;
    let committed = client.committed_offsets(group).await?;
    let mut plan = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "TOPIC\tPARTITION\tOLD\tNEW")?;
    for p in 0..partitions {
        let target = target_offset(client, topic, p, to).await?;
        let old = committed
            .get(&(topic.to_string(), p))
            .map_or("-".to_string(), i64::to_string);
        writeln!(out, "{topic}\t{p}\t{old}\t{target}")?;
        plan.push((topic.to_string(), p, target));
    }
    if dry_run {
        writeln!(out, "(dry run: nothing committed)")?;
    } else {
        client.commit_offsets(group, &plan).await?;
        writeln!(out, "committed {} offsets for group {group}", plan.len())?;
    }
    Ok(())
}

/// Where `to` puts partition `p` of `topic`, within what its log holds.
pub(super) async fn target_offset(
    client: &mut Client,
    topic: &str,
    p: i32,
    to: &ResetTarget,
) -> anyhow::Result<i64> {
    let earliest = client.list_offsets(topic, p, OffsetSpec::Earliest).await?;
    let latest = client.list_offsets(topic, p, OffsetSpec::Latest).await?;
    Ok(if to.to_earliest {
        earliest
    } else if to.to_latest {
        latest
    } else if let Some(n) = to.to_offset {
        n.clamp(earliest, latest)
    } else if let Some(ms) = to.to_time {
        match client
            .list_offsets(topic, p, OffsetSpec::Timestamp(ms))
            .await?
        {
            -1 => latest,
            found => found,
        }
    } else {
        bail!("give one of --to-earliest, --to-latest, --to-offset, --to-time");
    })
}
