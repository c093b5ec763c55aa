//! `tidelog cluster`: the controller quorum, the brokers and partition health (`info`),
//! and a balanced move of replicas onto a new broker (`add-broker`).

mod info_json;
mod plan;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{bail, Context};
use tidelog_client::{Client, ClusterMetadata, TopicMetadata};

use super::output::{print_json, OutputArgs};
use super::ConnectArgs;
use plan::{plan_add_broker, AddBrokerPlan};
use tidelog_controller::ops::Assignment;

#[derive(clap::Args)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Quorum leader, voters and their lag; brokers (fenced state, rack); partitions
    /// under-replicated and offline.
    Info {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Plan a balanced move of replicas onto a new, empty broker and print it; with
    /// --execute, submit the moves as partition reassignments.
    AddBroker {
        /// Node id of the new broker (started and registered already).
        #[arg(long)]
        broker_id: i32,
        /// Submit the plan instead of only printing it.
        #[arg(long)]
        execute: bool,
        /// With --execute: wait until every move is finished, showing the bytes copied,
        /// the copy rate, the follower throttle and the time left.
        #[arg(long, requires = "execute")]
        wait: bool,
        /// With --wait: give up waiting after this many seconds (the moves go on).
        #[arg(long, default_value_t = 3600, requires = "wait")]
        timeout: u64,
    },
}

pub(crate) fn run(args: ClusterArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            ClusterCommand::Info { output } if output.json() => {
                print_json(&info_json::info_json(&mut client).await?)
            }
            ClusterCommand::Info { .. } => info(&mut client).await,
            ClusterCommand::AddBroker {
                broker_id,
                execute,
                wait,
                timeout,
            } => {
                let wait = wait.then(|| std::time::Duration::from_secs(timeout));
                add_broker(&mut client, broker_id, execute, wait).await
            }
        }
    })
}

fn ids(v: &[i32]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

async fn info(client: &mut Client) -> anyhow::Result<()> {
    let mut text = String::new();
    let cluster = client
        .describe_cluster()
        .await
        .context("describing the cluster")?;
    writeln!(text, "Cluster: {}", cluster.cluster_id)?;
    match client.describe_quorum().await {
        Ok(quorum) => {
            writeln!(
                text,
                "Controller quorum: leader {}, epoch {}, high watermark {}",
                if quorum.leader_id >= 0 {
                    quorum.leader_id.to_string()
                } else {
                    "none".into()
                },
                quorum.leader_epoch,
                quorum.high_watermark
            )?;
            writeln!(text, "  VOTER\tROLE\tLOG END\tLAG")?;
            for v in &quorum.voters {
                let role = if v.node_id == quorum.leader_id {
                    "leader"
                } else {
                    "follower"
                };
                let end = if v.log_end_offset >= 0 {
                    v.log_end_offset.to_string()
                } else {
                    "?".into()
                };
                let lag = quorum
                    .lag_of(v)
                    .map_or_else(|| "?".to_owned(), |l| l.to_string());
                writeln!(text, "  {}\t{role}\t{end}\t{lag}", v.node_id)?;
            }
        }
        Err(e) => writeln!(text, "Controller quorum: unavailable ({e})")?,
    }
    let metadata = client.refresh_metadata(None, false).await?.clone();
    writeln!(text, "Brokers:")?;
    writeln!(text, "  ID\tADDRESS\tRACK\tSTATE")?;
    let mut listed = BTreeSet::new();
    for b in &cluster.brokers {
        listed.insert(b.node_id);
        let state = match (cluster.includes_fenced, b.fenced) {
            (true, true) => "fenced",
            (true, false) => "unfenced",
            (false, _) => "live",
        };
        let rack = b.rack.as_deref().unwrap_or("-");
        writeln!(text, "  {}\t{}\t{rack}\t{state}", b.node_id, b.address)?;
    }
    // Brokers that hold replicas but are not live (stopped, fenced, never came back).
    for id in replica_holders(&metadata).difference(&listed) {
        writeln!(text, "  {id}\t-\t-\tnot live (holds replicas)")?;
    }
    let health = PartitionHealth::of(metadata.topics.values());
    writeln!(
        text,
        "Partitions: {} in {} topics; under-replicated: {}; offline: {}; leader not preferred: {}",
        health.total,
        metadata.topics.len(),
        health.under_replicated.len(),
        health.offline.len(),
        health.not_preferred
    )?;
    const SHOWN: usize = 20;
    for (label, list) in [
        ("offline", &health.offline),
        ("under-replicated", &health.under_replicated),
    ] {
        for line in list.iter().take(SHOWN) {
            writeln!(text, "  {label}: {line}")?;
        }
        if list.len() > SHOWN {
            writeln!(text, "  ... and {} more {label}", list.len() - SHOWN)?;
        }
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

fn replica_holders(metadata: &ClusterMetadata) -> BTreeSet<i32> {
    metadata
        .topics
        .values()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.replicas.iter().copied())
        .collect()
}

/// Partition counts an operator watches, with the partitions named.
#[derive(Debug, Default, PartialEq, Eq)]
struct PartitionHealth {
    total: usize,
    /// Fewer in-sync replicas than replicas: "topic-p (replicas r isr i)".
    under_replicated: Vec<String>,
    /// No leader.
    offline: Vec<String>,
    /// Led by a replica other than the first (a preferred election would move it).
    not_preferred: usize,
}

impl PartitionHealth {
    fn of<'a>(topics: impl Iterator<Item = &'a TopicMetadata>) -> Self {
        let mut health = PartitionHealth::default();
        for t in topics {
            for p in &t.partitions {
                health.total += 1;
                let describe = || {
                    format!(
                        "{}-{} (replicas {} isr {})",
                        t.name,
                        p.partition,
                        ids(&p.replicas),
                        ids(&p.isr)
                    )
                };
                if p.leader < 0 {
                    health.offline.push(describe());
                } else if p.replicas.first() != Some(&p.leader) {
                    health.not_preferred += 1;
                }
                if p.isr.len() < p.replicas.len() {
                    health.under_replicated.push(describe());
                }
            }
        }
        health
    }
}

/// Plans (and with `execute` submits) the moves onto `broker_id`; with `wait`, follows
/// them until finished, at most that long.
async fn add_broker(
    client: &mut Client,
    broker_id: i32,
    execute: bool,
    wait: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let metadata = client.refresh_metadata(None, false).await?.clone();
    if !metadata.brokers.contains_key(&broker_id) {
        bail!(
            "broker {broker_id} is not a live broker of this cluster (live: {}); start it \
             with --node-id {broker_id} first, it registers itself",
            ids(&metadata.brokers.keys().copied().collect::<Vec<_>>())
        );
    }
    let moving = client
        .list_partition_reassignments(None)
        .await
        .context("listing reassignments in progress")?;
    if !moving.is_empty() {
        bail!(
            "{} reassignments are still in progress; wait for them to finish \
             (tidelog partition list-reassignments) before planning more",
            moving.len()
        );
    }
    let current: Assignment = metadata
        .topics
        .values()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| ((t.name.clone(), p.partition), p.replicas.clone()))
        })
        .collect();
    let brokers: Vec<(i32, Option<&str>)> = metadata
        .brokers
        .values()
        .map(|b| (b.node_id, b.rack.as_deref()))
        .collect();
    let plan = plan_add_broker(&current, &brokers, broker_id);
    print_plan(&plan, broker_id)?;
    if plan.moves.is_empty() {
        return Ok(());
    }
    if !execute {
        println!("Run again with --execute to submit these reassignments.");
        return Ok(());
    }
    let changes: Vec<(String, i32, Option<Vec<i32>>)> = plan
        .moves
        .iter()
        .map(|m| (m.topic.clone(), m.partition, Some(m.new_replicas.clone())))
        .collect();
    let outcomes = client.alter_partition_reassignments(&changes).await?;
    let mut failed = 0;
    for o in &outcomes {
        match &o.result {
            Ok(()) => println!("{}-{}: reassignment started", o.topic, o.partition),
            Err(e) => {
                failed += 1;
                println!("{}-{}: {e}", o.topic, o.partition);
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} reassignments were refused", outcomes.len());
    }
    let Some(timeout) = wait else {
        println!("Follow them with: tidelog partition list-reassignments");
        return Ok(());
    };
    let targets: Vec<_> = plan
        .moves
        .iter()
        .map(|m| ((m.topic.clone(), m.partition), m.new_replicas.clone()))
        .collect();
    super::reassign_wait::wait_for_reassignments(client, &targets, timeout).await
}

fn print_plan(plan: &AddBrokerPlan, broker_id: i32) -> anyhow::Result<()> {
    let mut text = String::new();
    if plan.moves.is_empty() {
        writeln!(
            text,
            "Nothing to move: broker {broker_id} would hold {} of {} replicas already \
             (target {}).",
            plan.load_after.get(&broker_id).copied().unwrap_or(0),
            plan.total_replicas,
            plan.target
        )?;
    } else {
        let moved: usize = plan.moves.iter().map(|m| m.from.len()).sum();
        let onto_new = plan
            .moves
            .iter()
            .filter(|m| m.new_replicas.contains(&broker_id) && !m.old_replicas.contains(&broker_id))
            .count();
        writeln!(
            text,
            "Plan: move {moved} replicas, {onto_new} of them onto broker {broker_id} \
             (target {} of {} replicas), changing {} partitions.",
            plan.target,
            plan.total_replicas,
            plan.moves.len()
        )?;
        writeln!(text, "  PARTITION\tFROM\tREPLICAS NOW\tREPLICAS AFTER")?;
        for m in &plan.moves {
            writeln!(
                text,
                "  {}-{}\t{}\t{}\t{}",
                m.topic,
                m.partition,
                ids(&m.from),
                ids(&m.old_replicas),
                ids(&m.new_replicas)
            )?;
        }
    }
    let summary = |counts: &BTreeMap<i32, usize>| {
        counts
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    writeln!(
        text,
        "Replicas per broker after: {}",
        summary(&plan.load_after)
    )?;
    writeln!(
        text,
        "Preferred leaders per broker after: {}",
        summary(&plan.leaders_after)
    )?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use tidelog_client::PartitionMetadata;

    use super::*;

    fn partition(p: i32, leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionMetadata {
        PartitionMetadata {
            partition: p,
            leader,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            offline: vec![],
            error: None,
        }
    }

    #[test]
    fn health_counts_under_replicated_offline_and_misplaced_leaders() {
        let topic = TopicMetadata {
            name: "orders".into(),
            topic_id: Default::default(),
            is_internal: false,
            partitions: vec![
                partition(0, 1, &[1, 2, 3], &[1, 2, 3]),
                partition(1, 3, &[2, 3, 1], &[3, 1]),
                partition(2, -1, &[3, 1, 2], &[3]),
            ],
        };
        let health = PartitionHealth::of([&topic].into_iter());
        assert_eq!(health.total, 3);
        assert_eq!(health.not_preferred, 1);
        assert_eq!(health.offline, vec!["orders-2 (replicas 3,1,2 isr 3)"]);
        assert_eq!(
            health.under_replicated,
            vec![
                "orders-1 (replicas 2,3,1 isr 3,1)",
                "orders-2 (replicas 3,1,2 isr 3)"
            ]
        );
    }
}
