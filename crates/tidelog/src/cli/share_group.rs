//! `tidelog share-group`: list, describe (members, and per share partition its start
//! offset and the records not yet delivered to completion), reset offsets, delete
//! offsets and delete share groups (KIP-932), as `kafka-share-groups.sh` does.

use std::io::Write;

use anyhow::bail;
use serde_json::json;
use tidelog_client::{Client, OffsetSpec};

use super::group::{target_offset, ResetTarget};
use super::output::{print_json, OutputArgs};
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct ShareGroupArgs {
    #[command(subcommand)]
    command: ShareGroupCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum ShareGroupCommand {
    /// List share groups with their state.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// State, epochs and members, and per share partition: its start offset (where the
    /// records still being delivered begin), the log end, and its lag: the broker's
    /// (KIP-1226: acknowledged records past the start do not count) when it answers
    /// one, else the log end less the start (an upper bound, marked `<=`).
    Describe {
        /// Share group id.
        group: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Move the start offsets of one topic's share partitions (refused while the group
    /// has members).
    ResetOffsets {
        /// Share group id.
        group: String,
        /// The topic whose share partitions are reset.
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Print the new start offsets without setting them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete the group's state for whole topics: it starts them again from its
    /// share.auto.offset.reset (refused while the group has members).
    DeleteOffsets {
        /// Share group id.
        group: String,
        /// A topic whose state is deleted (repeat for more).
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
    },
    /// Delete a share group without members, with its share partitions' state.
    Delete {
        /// Share group id.
        group: String,
    },
}

pub(crate) fn run(args: ShareGroupArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            ShareGroupCommand::List { output } => list(&mut client, output).await?,
            ShareGroupCommand::Describe { group, output } => {
                describe(&mut client, &group, output).await?
            }
            ShareGroupCommand::ResetOffsets {
                group,
                topic,
                to,
                dry_run,
            } => reset(&mut client, &group, &topic, &to, dry_run).await?,
            ShareGroupCommand::DeleteOffsets { group, topics } => {
                client.delete_share_group_offsets(&group, &topics).await?;
                println!(
                    "deleted the state of share group {group} for {}",
                    topics.join(", ")
                );
            }
            ShareGroupCommand::Delete { group } => {
                // DeleteGroups takes any kind of group: make sure this one is a share group.
                let d = client.describe_share_group(&group).await?;
                if !d.members.is_empty() {
                    bail!(
                        "share group {group} has {} members; stop its consumers before deleting it",
                        d.members.len()
                    );
                }
                client.delete_group(&group).await?;
                println!("deleted share group {group}");
            }
        }
        Ok(())
    })
}

async fn list(client: &mut Client, output: OutputArgs) -> anyhow::Result<()> {
    let groups: Vec<_> = client
        .list_groups()
        .await?
        .into_iter()
        .filter(|g| g.group_type == "share")
        .collect();
    if output.json() {
        let groups: Vec<_> = groups
            .iter()
            .map(|g| json!({ "group": g.group_id, "state": g.state }))
            .collect();
        return print_json(&json!({ "groups": groups }));
    }
    if groups.is_empty() {
        eprintln!("no share groups");
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "GROUP\tSTATE")?;
    for g in groups {
        writeln!(out, "{}\t{}", g.group_id, g.state)?;
    }
    Ok(())
}

async fn describe(client: &mut Client, group: &str, output: OutputArgs) -> anyhow::Result<()> {
    let d = client.describe_share_group(group).await?;
    let offsets = client.share_group_offsets(group).await?;
    let mut rows = Vec::with_capacity(offsets.len());
    for o in &offsets {
        let end = client
            .list_offsets(&o.topic, o.partition, OffsetSpec::Latest)
            .await?;
        // (lag, whether it is only an upper bound).
        let lag = match o.lag {
            Some(lag) => Some((lag, false)),
            None => o.start_offset.map(|start| ((end - start).max(0), true)),
        };
        rows.push((o, end, lag));
    }
    if output.json() {
        let members: Vec<_> = d
            .members
            .iter()
            .map(|m| {
                json!({
                    "member_id": m.member_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed": m.subscribed,
                    "assignment": m.assignment.iter().map(|(t, p)| json!({"topic": t, "partitions": p})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let partitions: Vec<_> = rows
            .iter()
            .map(|(o, end, lag)| {
                json!({
                    "topic": o.topic, "partition": o.partition, "start_offset": o.start_offset,
                    "leader_epoch": o.leader_epoch, "log_end": end,
                    "lag": lag.map(|(lag, _)| lag),
                    "lag_is_upper_bound": lag.map(|(_, bound)| bound),
                })
            })
            .collect();
        return print_json(&json!({
            "group": d.group_id, "state": d.state, "group_epoch": d.group_epoch,
            "assignment_epoch": d.assignment_epoch, "members": members, "partitions": partitions,
        }));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "share group {} ({}, group epoch {}, assignment epoch {}, {} members)",
        d.group_id,
        d.state,
        d.group_epoch,
        d.assignment_epoch,
        d.members.len()
    )?;
    if !d.members.is_empty() {
        writeln!(out, "\nMEMBER\tEPOCH\tCLIENT\tHOST\tASSIGNMENT")?;
        for m in &d.members {
            let assignment: Vec<String> = m
                .assignment
                .iter()
                .map(|(t, p)| format!("{t}:{p:?}"))
                .collect();
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                m.member_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                assignment.join(" ")
            )?;
        }
    }
    writeln!(
        out,
        "\nTOPIC\tPARTITION\tSTART-OFFSET\tLEADER-EPOCH\tLOG-END\tLAG"
    )?;
    let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for (o, end, lag) in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{end}\t{}",
            o.topic,
            o.partition,
            dash(o.start_offset),
            dash(o.leader_epoch.map(i64::from)),
            lag.map_or("-".to_string(), |(lag, bound)| if bound {
                format!("<={lag}")
            } else {
                lag.to_string()
            })
        )?;
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
    let d = client.describe_share_group(group).await?;
    if !d.members.is_empty() {
        bail!(
            "share group {group} has {} members; stop its consumers before resetting offsets",
            d.members.len()
        );
    }
    let current = client.share_group_offsets(group).await?;
    let partitions = client.partition_count(topic, false).await?;
    let mut plan = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "TOPIC\tPARTITION\tOLD\tNEW")?;
    for p in 0..partitions {
        let target = target_offset(client, topic, p, to).await?;
        let old = current
            .iter()
            .find(|o| o.topic == topic && o.partition == p)
            .and_then(|o| o.start_offset)
            .map_or("-".to_string(), |v| v.to_string());
        writeln!(out, "{topic}\t{p}\t{old}\t{target}")?;
        plan.push((p, target));
    }
    if dry_run {
        writeln!(out, "(dry run: nothing set)")?;
    } else {
        client
            .alter_share_group_offsets(group, topic, &plan)
            .await?;
        writeln!(
            out,
            "set {} start offsets for share group {group}",
            plan.len()
        )?;
    }
    Ok(())
}
