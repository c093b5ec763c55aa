//! `tidelog consume TOPIC`: print records from one or all partitions, following the log.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tidelog_client::groups::Membership;
use tidelog_client::{
    Client, ClientError, FetchOptions, FetchedPartition, OffsetSpec, ResponseError,
};

use super::format::RecordFormat;
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Topic to read.
    topic: String,
    /// Read only this partition (default: all).
    #[arg(long, conflicts_with = "group")]
    partition: Option<i32>,
    /// Consume as a member of this consumer group: read the partitions the group assigns,
    /// start at its committed offsets (where it has none: --from-beginning, --from-time
    /// or the log end), commit what was printed, and leave the group on exit.
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// Start at the earliest offset still in the log.
    #[arg(long, conflicts_with_all = ["offset", "from_time"])]
    from_beginning: bool,
    /// Start at this offset (negative: that many records before the end).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "from_time")]
    offset: Option<i64>,
    /// Start at the first record with a timestamp at or after this: ms since the epoch,
    /// an RFC 3339 time (2026-11-29T21:00:00Z) or an age (-15m, -2h, -30s, -1d).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_from_time)]
    from_time: Option<i64>,
    /// Exit after this many records (default: follow until Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
    /// Output format: %k key, %v value, %p partition, %o offset, %t timestamp, %h headers.
    #[arg(long, default_value = "%v")]
    format: String,
    /// Exit (successfully) after this long without a new record.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Longest a fetch waits at the end of the log before it is answered empty.
    #[arg(long, default_value_t = 500)]
    max_wait_ms: u64,
    #[command(flatten)]
    connect: ConnectArgs,
}

fn parse_from_time(s: &str) -> Result<i64, String> {
    super::when::parse_time(s, super::when::now_ms())
}

pub(crate) fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let format = RecordFormat::parse(&args.format).map_err(anyhow::Error::msg)?;
    if args.offset.is_some() && args.partition.is_none() {
        bail!("--offset needs --partition (offsets differ per partition)");
    }
    super::runtime()?.block_on(async move {
        tokio::select! {
            r = consume(&args, &format) => r,
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C"),
        }
    })
}

/// Where to start in one partition.
async fn start_offset(
    client: &mut Client,
    args: &ConsumeArgs,
    partition: i32,
) -> anyhow::Result<i64> {
    let topic = &args.topic;
    let offset = match (args.from_beginning, args.offset, args.from_time) {
        (true, _, _) => {
            client
                .list_offsets(topic, partition, OffsetSpec::Earliest)
                .await?
        }
        (_, Some(n), _) if n >= 0 => n,
        (_, Some(back), _) => {
            let end = client
                .list_offsets(topic, partition, OffsetSpec::Latest)
                .await?;
            let start = client
                .list_offsets(topic, partition, OffsetSpec::Earliest)
                .await?;
            end.saturating_add(back).max(start)
        }
        (_, _, Some(ms)) => match client
            .list_offsets(topic, partition, OffsetSpec::Timestamp(ms))
            .await?
        {
            // No record that late: start at the end.
            -1 => {
                client
                    .list_offsets(topic, partition, OffsetSpec::Latest)
                    .await?
            }
            n => n,
        },
        _ => {
            client
                .list_offsets(topic, partition, OffsetSpec::Latest)
                .await?
        }
    };
    Ok(offset)
}

async fn consume(args: &ConsumeArgs, format: &RecordFormat) -> anyhow::Result<()> {
    let mut client = args.connect.connect().await?;
    let topic = client.topic(&args.topic, false).await?;
    let partitions: Vec<i32> = match args.partition {
        Some(p) if topic.partition(p).is_some() => vec![p],
        Some(p) => bail!(ClientError::UnknownPartition {
            topic: args.topic.clone(),
            partition: p
        }),
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let mut member = match &args.group {
        Some(group) => Some(client.join_group(group, &args.topic).await?),
        None => None,
    };
    let partitions = member.as_ref().map_or(partitions, |m| m.partitions.clone());
    let mut positions = starting_positions(&mut client, args, &partitions).await?;
    let mut committed = positions.clone();
    let mut printed = 0u64;
    let mut last_activity = Instant::now();
    let idle_limit = args.timeout_ms.map(Duration::from_millis);
    let mut retries = 0u32;
    let mut out = Vec::with_capacity(64 * 1024);
    let finished: anyhow::Result<()> = loop {
        if args.count.is_some_and(|n| printed >= n) {
            break Ok(());
        }
        let mut max_wait = Duration::from_millis(args.max_wait_ms);
        if let Some(limit) = idle_limit {
            let left = limit.saturating_sub(last_activity.elapsed());
            if left.is_zero() {
                break Ok(());
            }
            max_wait = max_wait.min(left);
        }
        if let Some(m) = member.as_mut() {
            if m.heartbeat_if_due().await? {
                commit_printed(m, &positions, &mut committed).await?;
                client.rejoin(m).await?;
                positions = starting_positions(&mut client, args, &m.partitions).await?;
                committed = positions.clone();
            }
        }
        if positions.is_empty() {
            // A member with no partitions (more members than partitions) only heartbeats.
            tokio::time::sleep(max_wait).await;
            continue;
        }
        let options = FetchOptions {
            max_wait,
            ..FetchOptions::default()
        };
        let fetched = match client.fetch_many(&args.topic, &positions, &options).await {
            Ok(f) => f,
            Err(e) if retries < client.config().retries && is_transient(&e) => {
                retries += 1;
                client.invalidate_topic(&args.topic);
                tokio::time::sleep(client.config().retry_backoff).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        retries = 0;
        for part in fetched {
            let Some(slot) = positions.iter_mut().find(|(p, _)| *p == part.partition) else {
                continue;
            };
            if let Some(error) = part.error {
                slot.1 = recover(&mut client, &args.topic, &part, slot.1, error).await?;
                continue;
            }
            // Where printing stopped: the next record to print, so a group commits
            // exactly what was printed when --count cuts a batch short.
            let mut next = part.next_offset;
            for r in &part.records {
                if args.count.is_some_and(|n| printed >= n) {
                    next = r.offset;
                    break;
                }
                format.write(r, &mut out);
                printed += 1;
                last_activity = Instant::now();
            }
            slot.1 = next;
        }
        if !out.is_empty() {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&out).and_then(|()| stdout.flush()) {
                Ok(()) => {}
                Err(e) if super::is_broken_pipe(&e) => return Ok(()),
                Err(e) => return Err(e).context("writing to stdout"),
            }
            out.clear();
            if let Some(m) = member.as_mut() {
                commit_printed(m, &positions, &mut committed).await?;
            }
        }
    };
    if let Some(mut m) = member {
        commit_printed(&mut m, &positions, &mut committed).await?;
        m.leave().await?;
    }
    finished
}

/// Where to start in each partition: a group's committed offset where it has one, else
/// what the flags say.
async fn starting_positions(
    client: &mut Client,
    args: &ConsumeArgs,
    partitions: &[i32],
) -> anyhow::Result<Vec<(i32, i64)>> {
    let committed = match &args.group {
        Some(group) => client.committed_offsets(group).await?,
        None => Default::default(),
    };
    let mut positions = Vec::with_capacity(partitions.len());
    for &p in partitions {
        let offset = match committed.get(&(args.topic.clone(), p)) {
            Some(&o) if o >= 0 => o,
            _ => start_offset(client, args, p).await?,
        };
        positions.push((p, offset));
    }
    Ok(positions)
}

/// Commits the positions that moved since the last commit.
async fn commit_printed(
    member: &mut Membership,
    positions: &[(i32, i64)],
    committed: &mut Vec<(i32, i64)>,
) -> anyhow::Result<()> {
    let moved: Vec<(i32, i64)> = positions
        .iter()
        .filter(|p| !committed.contains(p))
        .copied()
        .collect();
    member.commit(&moved).await?;
    *committed = positions.to_vec();
    Ok(())
}

fn is_transient(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::NoLeader { .. }
            | ClientError::Io { .. }
            | ClientError::Closed { .. }
            | ClientError::Timeout { .. }
            | ClientError::Connect { .. }
    )
}

/// A partition answered with an error: move to a valid position or give up.
async fn recover(
    client: &mut Client,
    topic: &str,
    part: &FetchedPartition,
    offset: i64,
    error: ResponseError,
) -> anyhow::Result<i64> {
    match error {
        ResponseError::OffsetOutOfRange => {
            let earliest = client
                .list_offsets(topic, part.partition, OffsetSpec::Earliest)
                .await?;
            let latest = client
                .list_offsets(topic, part.partition, OffsetSpec::Latest)
                .await?;
            let next = if offset < earliest { earliest } else { latest };
            eprintln!(
                "partition {}: offset {offset} is out of range [{earliest}, {latest}], continuing at {next}",
                part.partition
            );
            Ok(next)
        }
        ResponseError::NotLeaderOrFollower
        | ResponseError::LeaderNotAvailable
        | ResponseError::UnknownTopicOrPartition
        | ResponseError::FencedLeaderEpoch
        | ResponseError::UnknownLeaderEpoch => {
            client.invalidate_topic(topic);
            tokio::time::sleep(client.config().retry_backoff).await;
            Ok(offset)
        }
        error => Err(ClientError::Broker {
            context: format!("fetch {topic}-{} at offset {offset}", part.partition),
            error,
            message: None,
        }
        .into()),
    }
}
