//! `tidelog partition`: move a partition's replicas (`reassign`), watch the moves
//! (`list-reassignments`) and elect leaders (`elect`).

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::bail;
use tidelog_client::{Client, ElectionType, PartitionOutcome, ResponseError, TopicPartition};

use super::output::{broker_ids, print_json, OutputArgs};
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct PartitionArgs {
    #[command(subcommand)]
    command: PartitionCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum PartitionCommand {
    /// Move a partition to a new replica list (new replicas catch up and join the ISR,
    /// then the old ones leave), or cancel a move in progress.
    Reassign {
        /// Topic name.
        #[arg(long)]
        topic: String,
        /// Partition index.
        #[arg(long)]
        partition: i32,
        /// The target replicas, preferred leader first: e.g. 1,2,4.
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "cancel",
            conflicts_with = "cancel"
        )]
        replicas: Vec<i32>,
        /// Cancel the move in progress (the partition keeps its original replicas).
        #[arg(long)]
        cancel: bool,
        /// Wait until the move is finished, showing the bytes the new replicas have
        /// copied, the copy rate, the follower throttle and the time left.
        #[arg(long, conflicts_with = "cancel")]
        wait: bool,
        /// With --wait: give up waiting after this many seconds (the move goes on).
        #[arg(long, default_value_t = 3600, requires = "wait")]
        timeout: u64,
    },
    /// Reassignments in progress: replicas, the ones being added and removed.
    ListReassignments {
        /// Only this topic's partitions.
        #[arg(long)]
        topic: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Elect leaders: the preferred (first) replica, or with --unclean any live replica
    /// of a partition that has no live in-sync replica (may lose acknowledged records).
    Elect {
        /// Unclean election instead of preferred.
        #[arg(long)]
        unclean: bool,
        /// Only this topic (default: every partition that needs an election).
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition of --topic.
        #[arg(long, requires = "topic")]
        partition: Option<i32>,
    },
}

pub(crate) fn run(args: PartitionArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            PartitionCommand::Reassign {
                topic,
                partition,
                replicas,
                cancel,
                wait,
                timeout,
            } => {
                let target = (!cancel).then_some(replicas.clone());
                reassign(&mut client, topic.clone(), partition, target, !wait).await?;
                if !wait {
                    return Ok(());
                }
                let timeout = std::time::Duration::from_secs(timeout);
                let target = [((topic, partition), replicas)];
                super::reassign_wait::wait_for_reassignments(&mut client, &target, timeout).await
            }
            PartitionCommand::ListReassignments { topic, output } => {
                list_reassignments(&mut client, topic, output).await
            }
            PartitionCommand::Elect {
                unclean,
                topic,
                partition,
            } => {
                let kind = if unclean {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                };
                elect(&mut client, kind, topic, partition).await
            }
        }
    })
}

/// The partitions of `topic` (all of them, or the one asked for).
async fn partitions_of(
    client: &mut Client,
    topic: &str,
    partition: Option<i32>,
) -> anyhow::Result<Vec<TopicPartition>> {
    client.invalidate_topic(topic);
    let metadata = client.topic(topic, false).await?;
    match partition {
        Some(p) if metadata.partition(p).is_none() => {
            bail!("topic {topic} has no partition {p}")
        }
        Some(p) => Ok(vec![(topic.to_owned(), p)]),
        None => Ok(metadata
            .partitions
            .iter()
            .map(|p| (topic.to_owned(), p.partition))
            .collect()),
    }
}

async fn reassign(
    client: &mut Client,
    topic: String,
    partition: i32,
    replicas: Option<Vec<i32>>,
    say_how_to_follow: bool,
) -> anyhow::Result<()> {
    let what = match &replicas {
        Some(r) => format!("reassignment of {topic}-{partition} to {}", broker_ids(r)),
        None => format!("cancellation of the reassignment of {topic}-{partition}"),
    };
    let outcomes = client
        .alter_partition_reassignments(&[(topic.clone(), partition, replicas)])
        .await?;
    let outcome = outcomes
        .into_iter()
        .find(|o| o.topic == topic && o.partition == partition);
    match outcome {
        Some(PartitionOutcome { result: Ok(()), .. }) => {
            if say_how_to_follow {
                println!("{what} accepted; follow it with: tidelog partition list-reassignments");
            }
            Ok(())
        }
        Some(PartitionOutcome { result: Err(e), .. }) => Err(e.into()),
        None => bail!("the broker did not answer for {topic}-{partition}"),
    }
}

async fn list_reassignments(
    client: &mut Client,
    topic: Option<String>,
    output: OutputArgs,
) -> anyhow::Result<()> {
    let filter = match &topic {
        Some(t) => Some(partitions_of(client, t, None).await?),
        None => None,
    };
    let moves = client
        .list_partition_reassignments(filter.as_deref())
        .await?;
    if output.json() {
        let moves: Vec<_> = moves
            .iter()
            .map(|m| {
                serde_json::json!({
                    "topic": m.topic, "partition": m.partition, "replicas": m.replicas,
                    "adding": m.adding, "removing": m.removing,
                })
            })
            .collect();
        return print_json(&serde_json::json!({ "reassignments": moves }));
    }
    let mut text = String::new();
    if moves.is_empty() {
        writeln!(text, "no reassignments in progress")?;
    } else {
        writeln!(text, "PARTITION\tREPLICAS\tADDING\tREMOVING")?;
        for m in &moves {
            writeln!(
                text,
                "{}-{}\t{}\t{}\t{}",
                m.topic,
                m.partition,
                broker_ids(&m.replicas),
                broker_ids(&m.adding),
                broker_ids(&m.removing)
            )?;
        }
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

async fn elect(
    client: &mut Client,
    kind: ElectionType,
    topic: Option<String>,
    partition: Option<i32>,
) -> anyhow::Result<()> {
    let partitions = match &topic {
        Some(t) => Some(partitions_of(client, t, partition).await?),
        None => None,
    };
    let outcomes = client.elect_leaders(kind, partitions.as_deref()).await?;
    let mut text = String::new();
    let mut failed = 0;
    for o in &outcomes {
        match &o.result {
            Ok(()) => writeln!(text, "{}-{}: leader elected", o.topic, o.partition)?,
            Err(e) if e.response_error() == Some(ResponseError::ElectionNotNeeded) => {
                writeln!(text, "{}-{}: no election needed", o.topic, o.partition)?
            }
            Err(e) => {
                failed += 1;
                writeln!(text, "{}-{}: {e}", o.topic, o.partition)?
            }
        }
    }
    if outcomes.is_empty() {
        writeln!(text, "no partition needed an election")?;
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if failed > 0 {
        bail!("{failed} of {} elections failed", outcomes.len());
    }
    Ok(())
}
