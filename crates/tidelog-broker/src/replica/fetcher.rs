//! One follower fetcher per source broker: a task that fetches every partition this
//! node follows from that leader in one Fetch request (v12, replica id set, the last
//! fetched epoch so the leader reports divergence), appends what comes back, takes the
//! leader's high watermark, and truncates where the leader says the logs diverge. The
//! network part is async; applying an answer (appends, truncations, their fsyncs and
//! checkpoints) runs on a blocking thread.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_env::net::Transport;
use tokio::sync::watch;
use tokio::time::Instant;

use super::fetch_backoff::FetchBackoff;
use super::partition::{Partition, PartitionError};
use super::peer::Peer;
use super::replication::Truncation;
use super::state::Role;
pub(crate) use super::throttle::Throttle;
use crate::config::BrokerConfig;
use crate::metrics::ReplicationProbe;
use crate::settings::{self, Setting};

/// Fetch v12: replica id in the body, last fetched epoch and diverging epoch.
const FETCH_VERSION: i16 = 12;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Beyond the leader's long-poll wait, how long a fetch may take before it is retried.
const REQUEST_SLACK: Duration = Duration::from_secs(10);

/// The `replica.fetch.*` settings of this node.
#[derive(Debug, Clone)]
pub(crate) struct FetcherSettings {
    pub(crate) node_id: i32,
    pub(crate) partition_max_bytes: i32,
    pub(crate) response_max_bytes: i32,
    pub(crate) wait_max_ms: i32,
    pub(crate) backoff: Duration,
}

impl FetcherSettings {
    pub(crate) fn from_config(node_id: i32, c: &BrokerConfig) -> Self {
        let int = |setting: Setting<i64>, low: i64| -> i32 {
            i32::try_from(c.get(setting).max(low)).unwrap_or(i32::MAX)
        };
        FetcherSettings {
            node_id,
            partition_max_bytes: int(settings::REPLICA_FETCH_MAX_BYTES, 1024),
            response_max_bytes: int(settings::REPLICA_FETCH_RESPONSE_MAX_BYTES, 1024),
            wait_max_ms: int(settings::REPLICA_FETCH_WAIT_MAX_MS, 0),
            backoff: c.duration(settings::REPLICA_FETCH_BACKOFF_MS),
        }
    }

    fn max_frame(&self) -> usize {
        let response = usize::try_from(self.response_max_bytes).unwrap_or(usize::MAX);
        let partition = usize::try_from(self.partition_max_bytes).unwrap_or(usize::MAX);
        // A response may exceed its limit by one whole batch (never more than
        // message.max.bytes, which a partition limit also bounds in practice).
        response
            .saturating_add(partition)
            .saturating_add(1 << 20)
            .min(1 << 30)
    }
}

/// One partition this node follows.
#[derive(Clone)]
pub(crate) struct FetchTarget {
    pub(crate) partition: Arc<Partition>,
}

/// Where the source broker listens and what we fetch from it.
pub(crate) struct SourceAssignment {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) targets: Vec<FetchTarget>,
}

/// What one request asked for a partition, to check the answer against.
struct Asked {
    partition: Arc<Partition>,
    epoch: i32,
    /// The fetch offset (the follower's log end when asked).
    offset: i64,
}

pub(crate) async fn run(
    source: i32,
    settings: FetcherSettings,
    mut assignment: watch::Receiver<Arc<SourceAssignment>>,
    transport: Arc<dyn Transport>,
    replication: Arc<ReplicationProbe>,
    throttle: Arc<Throttle>,
) {
    let mut peer: Option<(Peer, String, u16)> = None;
    // The last security refusal logged, so a misconfiguration is logged once.
    let mut refused: Option<String> = None;
    let mut backoff = FetchBackoff::new(settings.backoff);
    loop {
        if assignment.has_changed().is_err() {
            return;
        }
        let current = Arc::clone(&assignment.borrow_and_update());
        let now = Instant::now();
        backoff.expire(now);
        if !backoff.is_empty() {
            let followed: HashSet<(&str, i32)> = current
                .targets
                .iter()
                .map(|t| (t.partition.topic.as_str(), t.partition.index))
                .collect();
            backoff.retain(|(topic, p)| followed.contains(&(topic.as_str(), *p)));
        }
        let (request, asked) = build_request(&settings, source, &current, &backoff);
        if asked.is_empty() {
            tokio::select! {
                changed = assignment.changed() => if changed.is_err() { return },
                _ = sleep_until_or(backoff.next_due(), settings.backoff) => {}
            }
            continue;
        }
        let reuse = peer
            .as_ref()
            .is_some_and(|(_, h, p)| *h == current.host && *p == current.port);
        if !reuse {
            match Peer::connect(
                &*transport,
                &current.host,
                current.port,
                format!("tidelog-replica-fetcher-{}", settings.node_id),
                CONNECT_TIMEOUT,
            )
            .await
            {
                Ok(p) => {
                    refused = None;
                    peer = Some((p, current.host.clone(), current.port));
                }
                Err(e) if e.is_refused_security() => {
                    // Once per distinct reason: it repeats at every backoff.
                    let reason = e.to_string();
                    if refused.as_deref() != Some(reason.as_str()) {
                        tracing::warn!(source, error = %reason, "the leader's inter-broker listener refused this node; check its ssl.* and SASL settings");
                        refused = Some(reason);
                    }
                    tokio::time::sleep(settings.backoff).await;
                    continue;
                }
                Err(e) => {
                    tracing::debug!(source, error = %e, "cannot connect to leader");
                    tokio::time::sleep(settings.backoff).await;
                    continue;
                }
            }
        }
        let Some((conn, _, _)) = peer.as_mut() else {
            continue;
        };
        let timeout =
            Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)) + REQUEST_SLACK;
        // A partition this node starts to follow must not wait out the leader's long
        // poll of the others: when one appears, the poll is abandoned (with its
        // connection, which may still receive the answer) and the next request asks
        // for it too.
        let result: Result<FetchResponse, _> = tokio::select! {
            result = conn.call(
                ApiKey::Fetch,
                FETCH_VERSION,
                &request,
                settings.max_frame(),
                timeout,
            ) => result,
            () = newly_followed(&mut assignment, &asked, &backoff) => {
                peer = None;
                continue;
            }
        };
        let response = match result {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) => {
                tracing::debug!(source, code = r.error_code, "fetch refused by leader");
                tokio::time::sleep(settings.backoff).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(source, error = %e, "fetch from leader failed; reconnecting");
                peer = None;
                tokio::time::sleep(settings.backoff).await;
                continue;
            }
        };
        // Appending, truncating and the fsyncs they may need are blocking file work:
        // the whole answer is applied on a blocking thread, one hop per fetch.
        let keys: Vec<(String, i32)> = asked.keys().cloned().collect();
        let applying = Arc::clone(&replication);
        let applied = tokio::task::spawn_blocking(move || {
            apply_response(source, &asked, &response, &applying)
        })
        .await;
        let (appended, failed) = applied.unwrap_or_else(|e| {
            tracing::error!(source, error = %e, "applying a fetch answer panicked");
            (0, keys.clone())
        });
        let now = Instant::now();
        for key in keys.iter().filter(|k| !failed.contains(k)) {
            backoff.succeeded(key);
        }
        for key in failed {
            backoff.failed(key, now);
        }
        let wait = throttle.book(appended, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

async fn sleep_until_or(at: Option<Instant>, otherwise: Duration) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => tokio::time::sleep(otherwise).await,
    }
}

fn target_key(t: &FetchTarget) -> (String, i32) {
    (t.partition.topic.clone(), t.partition.index)
}

/// Resolves once the assignment names a partition that `asked` lacks and that is not
/// waiting out a backoff (or the assignment is dropped: the loop then ends).
async fn newly_followed(
    assignment: &mut watch::Receiver<Arc<SourceAssignment>>,
    asked: &HashMap<(String, i32), Asked>,
    backoff: &FetchBackoff,
) {
    loop {
        if assignment.changed().await.is_err() {
            return;
        }
        let current = Arc::clone(&assignment.borrow());
        let added = current.targets.iter().any(|t| {
            let key = target_key(t);
            !asked.contains_key(&key) && !backoff.is_delayed(&key)
        });
        if added {
            return;
        }
    }
}

/// The next Fetch, and what it asks per partition. Its long-poll wait ends no later
/// than the first delayed partition is due again, so a short retry is not held up by
/// the others.
fn build_request(
    settings: &FetcherSettings,
    source: i32,
    current: &SourceAssignment,
    backoff: &FetchBackoff,
) -> (FetchRequest, HashMap<(String, i32), Asked>) {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut asked = HashMap::new();
    for t in &current.targets {
        let p = &t.partition;
        let key = target_key(t);
        if backoff.is_delayed(&key) || p.role() != (Role::Follower { leader: source }) {
            continue;
        }
        let Ok((offset, last_epoch, log_start)) = p.follower_position() else {
            continue;
        };
        let epoch = p.leader_epoch();
        let fp = FetchPartition::default()
            .with_partition(p.index)
            .with_current_leader_epoch(epoch)
            .with_fetch_offset(offset)
            .with_last_fetched_epoch(last_epoch)
            .with_log_start_offset(log_start)
            .with_partition_max_bytes(settings.partition_max_bytes);
        match topics.iter_mut().find(|ft| ft.topic.0.as_str() == p.topic) {
            Some(ft) => ft.partitions.push(fp),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(p.topic.clone())))
                    .with_topic_id(p.topic_id)
                    .with_partitions(vec![fp]),
            ),
        }
        asked.insert(
            key,
            Asked {
                partition: Arc::clone(p),
                epoch,
                offset,
            },
        );
    }
    let wait_ms = backoff.next_due().map_or(settings.wait_max_ms, |due| {
        let until_due = due.saturating_duration_since(Instant::now()).as_millis();
        i32::try_from(until_due).map_or(settings.wait_max_ms, |ms| ms.min(settings.wait_max_ms))
    });
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(settings.node_id))
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(settings.response_max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    (request, asked)
}

/// Why a partition's follower fetch backs off.
#[derive(Debug, thiserror::Error)]
enum FollowerError {
    #[error("the leader answered with error code {0}")]
    Refused(i16),
    #[error("resetting to the leader's log start failed: {0}")]
    Reset(PartitionError),
    #[error("truncating to the divergence point failed: {0}")]
    Truncate(PartitionError),
    #[error("appending the leader's records failed: {0}")]
    Append(PartitionError),
}

/// Applies every partition's answer (blocking). Returns the bytes appended and the
/// partitions that should back off.
fn apply_response(
    source: i32,
    asked: &HashMap<(String, i32), Asked>,
    response: &FetchResponse,
    replication: &ReplicationProbe,
) -> (usize, Vec<(String, i32)>) {
    let mut appended = 0usize;
    let mut failed = Vec::new();
    for topic in &response.responses {
        for data in &topic.partitions {
            let key = (topic.topic.0.to_string(), data.partition_index);
            let Some(a) = asked.get(&key) else { continue };
            match handle_partition(a, data, replication, source) {
                Ok(bytes) => appended = appended.saturating_add(bytes),
                Err(e) => {
                    let p = &a.partition;
                    tracing::debug!(topic = %p.topic, partition = p.index, source, error = %e, "follower fetch backs off");
                    failed.push(key);
                }
            }
        }
    }
    (appended, failed)
}

/// Applies one partition's answer. Returns the bytes appended, or why the partition
/// should back off.
fn handle_partition(
    a: &Asked,
    data: &PartitionData,
    replication: &ReplicationProbe,
    source: i32,
) -> Result<usize, FollowerError> {
    let p = &a.partition;
    if data.error_code == ResponseError::OffsetOutOfRange.code() {
        let t = p
            .reset_out_of_range(data.log_start_offset, data.high_watermark)
            .map_err(FollowerError::Reset)?;
        report_truncation(p, t, replication);
        return Ok(0);
    }
    if data.error_code != 0 {
        return Err(FollowerError::Refused(data.error_code));
    }
    if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
        let t = p
            .truncate_to_divergence(data.diverging_epoch.epoch, data.diverging_epoch.end_offset)
            .map_err(FollowerError::Truncate)?;
        report_truncation(p, t, replication);
        return Ok(0);
    }
    let records = data.records.as_deref().unwrap_or(&[]);
    let whole = whole_batches(records);
    let from = first_batch_reaching(&records[..whole], a.offset);
    p.append_replicated(
        source,
        a.epoch,
        &records[from..whole],
        data.high_watermark,
        data.log_start_offset,
    )
    .map_err(FollowerError::Append)
}

/// Where the first batch that holds `offset` or later starts in `records` (whole
/// batches): a leader answers with the batch containing the fetch offset, and batches
/// wholly below the follower's log end are already there.
pub(crate) fn first_batch_reaching(records: &[u8], offset: i64) -> usize {
    let mut at = 0usize;
    while let Some(header) = records.get(at..at + 27) {
        let base = i64::from_be_bytes([
            header[0], header[1], header[2], header[3], header[4], header[5], header[6], header[7],
        ]);
        let delta = i32::from_be_bytes([header[23], header[24], header[25], header[26]]);
        let size = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
        if base.saturating_add(i64::from(delta)) >= offset {
            break;
        }
        match usize::try_from(size).ok().and_then(|s| s.checked_add(12)) {
            Some(len) => at = at.saturating_add(len).min(records.len()),
            None => break,
        }
    }
    at
}

/// Length of the whole batches at the start of `records` (a leader may cut the last
/// one short at its size limit).
pub(crate) fn whole_batches(records: &[u8]) -> usize {
    let mut at = 0usize;
    while let Some(len_bytes) = records.get(at + 8..at + 12) {
        let declared = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let Some(size) = usize::try_from(declared)
            .ok()
            .and_then(|d| d.checked_add(12))
        else {
            break;
        };
        match at.checked_add(size) {
            Some(end) if end <= records.len() => at = end,
            _ => break,
        }
    }
    at
}

fn report_truncation(p: &Partition, t: Option<Truncation>, replication: &ReplicationProbe) {
    let Some(t) = t else { return };
    replication.truncated();
    let lost = t.committed_records_lost();
    if lost > 0 {
        tracing::warn!(
            topic = %p.topic, partition = p.index, old_end = t.old_end, new_end = t.new_end,
            old_high_watermark = t.old_high_watermark, records_lost = lost,
            "truncated below the old high watermark: records acknowledged by a former leader are gone (unclean election)"
        );
        replication.unclean_truncated_records(lost);
    } else {
        tracing::info!(
            topic = %p.topic, partition = p.index, old_end = t.old_end, new_end = t.new_end,
            "truncated to the new leader's log"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::whole_batches;
    use tidelog_storage::BatchBuilder;

    #[test]
    fn batches_below_the_fetch_offset_are_skipped() {
        let mut one = BatchBuilder::new()
            .kv(Some(b"k"), Some(b"v"), 1)
            .kv(Some(b"k"), Some(b"w"), 1)
            .build()
            .unwrap();
        let mut two = one.clone();
        one[0..8].copy_from_slice(&10i64.to_be_bytes()); // offsets 10-11
        two[0..8].copy_from_slice(&12i64.to_be_bytes()); // offsets 12-13
        let mut both = one.clone();
        both.extend_from_slice(&two);
        assert_eq!(super::first_batch_reaching(&both, 10), 0);
        assert_eq!(super::first_batch_reaching(&both, 11), 0);
        assert_eq!(super::first_batch_reaching(&both, 12), one.len());
        assert_eq!(super::first_batch_reaching(&both, 14), both.len());
    }

    #[test]
    fn a_trailing_partial_batch_is_left_out() {
        let one = BatchBuilder::new()
            .kv(Some(b"k"), Some(b"v"), 1)
            .build()
            .unwrap();
        let mut two = one.clone();
        two.extend_from_slice(&one);
        assert_eq!(whole_batches(&two), two.len());
        assert_eq!(whole_batches(&two[..two.len() - 1]), one.len());
        assert_eq!(whole_batches(&two[..5]), 0);
        assert_eq!(whole_batches(&[]), 0);
    }
}
