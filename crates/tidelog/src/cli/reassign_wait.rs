//! `partition reassign --wait`: follows a reassignment until the controller reports it
//! finished, showing how many bytes the added replicas have copied, the copy rate, the
//! follower throttle that bounds it, and the time left at that rate.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use anyhow::bail;
use tidelog_client::{Client, PartitionReassignment, TopicPartition};

use super::output::broker_ids;
use super::progress::Progress;
use crate::plan::format::binary_bytes;

/// How often the copy is measured.
const POLL: Duration = Duration::from_secs(1);
/// The copy rate is the bytes copied over this last stretch of time.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// The throttle is read again this often: an operator may raise it mid-move.
const THROTTLE_REFRESH: Duration = Duration::from_secs(15);
/// How long metadata may take to show a finished move.
const METADATA_CATCH_UP: Duration = Duration::from_secs(10);
/// `follower.replication.throttled.rate`'s default: no throttle.
const UNTHROTTLED: i64 = i64::MAX;

/// Bytes the added replicas hold, sampled over time.
struct CopyRate {
    samples: VecDeque<(Instant, i64)>,
}

impl CopyRate {
    fn new() -> CopyRate {
        CopyRate {
            samples: VecDeque::new(),
        }
    }

    fn add(&mut self, at: Instant, copied: i64) {
        self.samples.push_back((at, copied));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| at.duration_since(*t) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Bytes per second over the window; `None` before two samples a moment apart.
    fn per_second(&self) -> Option<f64> {
        let (first, last) = (self.samples.front()?, self.samples.back()?);
        let secs = last.0.duration_since(first.0).as_secs_f64();
        (secs >= 0.5).then(|| (last.1 - first.1).max(0) as f64 / secs)
    }
}

/// What is left of a move: `remaining` bytes at the observed `rate`, or, before a rate is
/// known, at the `throttle` (bytes/s summed over the adding brokers).
fn time_left(remaining: i64, rate: Option<f64>, throttle: Option<f64>) -> Option<Duration> {
    if remaining <= 0 {
        return Some(Duration::ZERO);
    }
    let speed = match (rate, throttle) {
        (Some(r), Some(t)) => r.min(t),
        (Some(r), None) => r,
        (None, t) => t?,
    };
    (speed > 0.0).then(|| Duration::from_secs_f64(remaining as f64 / speed))
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// The progress line: copied of total, rate, throttle, time left.
fn describe(
    copied: i64,
    total: i64,
    rate: Option<f64>,
    throttle: Option<f64>,
    left: Option<Duration>,
) -> String {
    let share = if total > 0 {
        format!(" ({:.0}%)", 100.0 * copied.min(total) as f64 / total as f64)
    } else {
        String::new()
    };
    let mut line = format!(
        "{} of {} copied{share}",
        binary_bytes(copied.min(total) as f64),
        binary_bytes(total as f64)
    );
    if let Some(rate) = rate {
        line += &format!(", {}/s", binary_bytes(rate));
    }
    match throttle {
        Some(t) => line += &format!(", throttle {}/s", binary_bytes(t)),
        None => line += ", unthrottled",
    }
    match left {
        Some(left) if left < Duration::from_secs(1) => line += ", under a second left",
        Some(left) => line += &format!(", about {} left", seconds(left)),
        None => {}
    }
    line
}

/// The summed `follower.replication.throttled.rate` of `brokers` (`None`: none of them is
/// throttled, or their configs cannot be read).
async fn throttle_of(client: &mut Client, brokers: &[i32]) -> Option<f64> {
    let mut total = 0.0;
    let mut throttled = false;
    for &broker in brokers {
        let configs = client.describe_broker_configs(broker).await.ok()?;
        let rate = configs
            .iter()
            .find(|c| c.name == "follower.replication.throttled.rate")
            .and_then(|c| c.value.as_deref()?.parse::<i64>().ok())
            .unwrap_or(UNTHROTTLED);
        if rate == UNTHROTTLED {
            return None;
        }
        throttled = true;
        total += rate as f64;
    }
    throttled.then_some(total)
}

/// One partition being moved: where to, and what its added replicas held when last
/// measured (kept when the move finishes, so the totals never go backwards).
struct Move {
    tp: TopicPartition,
    target: Vec<i32>,
    copied: i64,
    total: i64,
    done: bool,
}

/// Measures every unfinished move in one round: the leader's size of each partition and
/// what its adding replicas hold, one DescribeLogDirs per broker involved. Returns the
/// adding brokers (for the throttle).
async fn measure(
    client: &mut Client,
    moves: &mut [Move],
    in_flight: &[PartitionReassignment],
) -> anyhow::Result<Vec<i32>> {
    let mut asked: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    let mut plan = Vec::new();
    let mut adding_brokers = BTreeSet::new();
    for (index, m) in moves.iter_mut().enumerate() {
        let current = in_flight
            .iter()
            .find(|r| r.topic == m.tp.0 && r.partition == m.tp.1);
        let Some(current) = current else {
            if !m.done {
                m.done = true;
                m.copied = m.total;
            }
            continue;
        };
        let leader = client.leader_of(&m.tp.0, m.tp.1).await?;
        asked.entry(leader).or_default().push(m.tp.clone());
        for &broker in &current.adding {
            asked.entry(broker).or_default().push(m.tp.clone());
            adding_brokers.insert(broker);
        }
        plan.push((index, leader, current.adding.clone()));
    }
    let mut sizes: BTreeMap<(i32, TopicPartition), i64> = BTreeMap::new();
    for (broker, partitions) in asked {
        for size in client.replica_sizes(broker, &partitions).await? {
            sizes.insert((broker, (size.topic, size.partition)), size.bytes);
        }
    }
    for (index, leader, adding) in plan {
        let m = &mut moves[index];
        let size = |broker: i32| sizes.get(&(broker, m.tp.clone())).copied().unwrap_or(0);
        let leader_bytes = size(leader);
        m.copied = adding.iter().map(|&b| size(b).min(leader_bytes)).sum();
        m.total = leader_bytes.saturating_mul(adding.len() as i64);
    }
    Ok(adding_brokers.into_iter().collect())
}

/// Waits until the reassignments of `targets` (partition, new replicas) are finished, at
/// most `timeout`, with a progress line on a terminal.
pub(crate) async fn wait_for_reassignments(
    client: &mut Client,
    targets: &[(TopicPartition, Vec<i32>)],
    timeout: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut progress = Progress::new();
    let mut rate = CopyRate::new();
    let mut throttle: Option<(Instant, Option<f64>)> = None;
    let mut moves: Vec<Move> = targets
        .iter()
        .map(|(tp, target)| Move {
            tp: tp.clone(),
            target: target.clone(),
            copied: 0,
            total: 0,
            done: false,
        })
        .collect();
    let partitions: Vec<TopicPartition> = moves.iter().map(|m| m.tp.clone()).collect();
    let what = match &moves[..] {
        [one] => format!("{}-{} to {}", one.tp.0, one.tp.1, broker_ids(&one.target)),
        many => format!("{} partitions", many.len()),
    };
    loop {
        let in_flight = client
            .list_partition_reassignments(Some(&partitions))
            .await?;
        let unfinished = moves
            .iter()
            .filter(|m| {
                in_flight
                    .iter()
                    .any(|r| r.topic == m.tp.0 && r.partition == m.tp.1)
            })
            .count();
        if unfinished == 0 {
            break;
        }
        if started.elapsed() >= timeout {
            progress.finish();
            bail!(
                "{unfinished} of {} reassignments are still in progress after {}: they go on; follow them with `tidelog partition list-reassignments`",
                moves.len(),
                seconds(timeout)
            );
        }
        for m in &moves {
            client.invalidate_topic(&m.tp.0);
        }
        let adding = measure(client, &mut moves, &in_flight).await?;
        let copied: i64 = moves.iter().map(|m| m.copied).sum();
        let total: i64 = moves.iter().map(|m| m.total).sum();
        let now = Instant::now();
        rate.add(now, copied);
        let stale = throttle.is_none_or(|(at, _)| now.duration_since(at) >= THROTTLE_REFRESH);
        if stale {
            throttle = Some((now, throttle_of(client, &adding).await));
        }
        let limit = throttle.and_then(|(_, t)| t);
        let per_second = rate.per_second();
        let left = time_left(total - copied, per_second, limit);
        let finished = if moves.len() > 1 {
            format!(" ({} of {} done)", moves.len() - unfinished, moves.len())
        } else {
            String::new()
        };
        progress.show(&format!(
            "moving {what}{finished}: {}",
            describe(copied, total, per_second, limit, left)
        ));
        tokio::time::sleep(POLL).await;
    }
    progress.finish();
    let took = seconds(started.elapsed());
    let mut wrong = Vec::new();
    for m in &moves {
        let replicas = replicas_seen(client, &m.tp.0, m.tp.1, &m.target).await?;
        if replicas != m.target {
            wrong.push(format!(
                "{}-{} has replicas {} rather than {}",
                m.tp.0,
                m.tp.1,
                broker_ids(&replicas),
                broker_ids(&m.target)
            ));
        }
    }
    if !wrong.is_empty() {
        bail!(
            "the reassignments ended after {took}, but {} (cancelled?)",
            wrong.join("; ")
        );
    }
    let copied: i64 = moves.iter().map(|m| m.copied).sum();
    println!(
        "reassignment of {what} complete after {took}; the added replicas held {} at the last measurement",
        binary_bytes(copied as f64)
    );
    Ok(())
}

/// The replicas of `topic`-`partition` in metadata, waiting a moment for them to be
/// `target`: the broker answering may not yet have applied what the controller finished.
async fn replicas_seen(
    client: &mut Client,
    topic: &str,
    partition: i32,
    target: &[i32],
) -> anyhow::Result<Vec<i32>> {
    let deadline = Instant::now() + METADATA_CATCH_UP;
    loop {
        client.invalidate_topic(topic);
        let metadata = client.topic(topic, false).await?;
        let replicas = metadata
            .partition(partition)
            .map(|p| p.replicas.clone())
            .unwrap_or_default();
        if replicas == target || Instant::now() >= deadline {
            return Ok(replicas);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_taken_over_the_last_ten_seconds() {
        let start = Instant::now();
        let mut rate = CopyRate::new();
        rate.add(start, 0);
        assert_eq!(rate.per_second(), None);
        rate.add(start + Duration::from_secs(5), 5_000_000);
        assert_eq!(rate.per_second(), Some(1_000_000.0));
        // 30 s later the first samples have left the window: 10 MB over the last 10 s.
        rate.add(start + Duration::from_secs(25), 20_000_000);
        rate.add(start + Duration::from_secs(35), 30_000_000);
        assert_eq!(rate.per_second(), Some(1_000_000.0));
    }

    #[test]
    fn time_left_uses_the_observed_rate_bounded_by_the_throttle() {
        let mib = 1_048_576;
        assert_eq!(
            time_left(10 * mib, Some(mib as f64), None),
            Some(Duration::from_secs(10))
        );
        // Before any rate is seen, the throttle says how fast the copy can go.
        assert_eq!(
            time_left(10 * mib, None, Some(2.0 * mib as f64)),
            Some(Duration::from_secs(5))
        );
        // A rate above the throttle is a burst; the throttle is what lasts.
        assert_eq!(
            time_left(10 * mib, Some(4.0 * mib as f64), Some(2.0 * mib as f64)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(time_left(10 * mib, None, None), None);
        assert_eq!(time_left(10 * mib, Some(0.0), None), None);
        assert_eq!(time_left(0, None, None), Some(Duration::ZERO));
    }

    #[test]
    fn the_line_says_copied_total_rate_throttle_and_time_left() {
        let mib = 1_048_576;
        let line = describe(
            3 * mib,
            12 * mib,
            Some(mib as f64),
            Some(mib as f64),
            Some(Duration::from_secs(9)),
        );
        assert_eq!(
            line,
            "3 MiB of 12 MiB copied (25%), 1 MiB/s, throttle 1 MiB/s, about 9 s left"
        );
        assert_eq!(
            describe(0, 0, None, None, None),
            "0 B of 0 B copied, unthrottled"
        );
    }
}
