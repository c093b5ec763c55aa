//! KIP-1191 dead-letter topics of share groups: the copy of a record that a share
//! group gave up on (REJECTed, or at `share.delivery.count.limit`) on the group's
//! dead-letter topic, written before the record is ARCHIVED.
//!
//! What Kafka 4.4 does, and so this module:
//!
//! * The group names its topic in the group config `errors.deadletterqueue.topic.name`
//!   (blank: no dead-letter topic, records are archived as before). A name starting
//!   with `__` is refused by IncrementalAlterConfigs (`group_config`).
//! * At each write the topic is checked, in Kafka's order
//!   (`ShareGroupDLQStateManager.validateDlqTopic`): not `__`-prefixed; if it exists,
//!   its topic config `errors.deadletterqueue.group.enable` is `true`; if it does not,
//!   the broker setting `errors.deadletterqueue.auto.create.topics.enable` is `true`
//!   (then it is created with the group flag set and CreateTime); its name starts with
//!   the broker setting `errors.deadletterqueue.topic.name.prefix` (default `dlq.`,
//!   empty: any name). A topic that fails a rule gets no copy: the record is archived
//!   and a warning logged, as in Kafka.
//! * The copy goes to partition `source partition % partitions of the topic`, is
//!   timestamped with the time of the write, carries the key and value of the record
//!   only when the group's `errors.deadletterqueue.copy.record.enable` is `true`
//!   (default `false`: a record of headers alone), never the record's own headers, and
//!   these headers: `__dlq.errors.topic`, `__dlq.errors.partition`,
//!   `__dlq.errors.offset`, `__dlq.errors.group`, `__dlq.errors.delivery.count`,
//!   `__dlq.errors.message` (`Offset rejected by client.` or `Offset delivery count
//!   exceeded the threshold.`).
//!
//! The records wait in ARCHIVING (stored as Kafka's state 3, see `partition`) while
//! their copy is written, and the state is stored before the copy is written, so a new
//! leader writes the copies of the records the old one had not finished rather than
//! delivering them: a failover can write a copy twice, never lose one, and a record
//! with a copy is never delivered again. The copy is
//! written with acks=all, appended here when this node leads the dead-letter partition,
//! else produced to its leader over the inter-broker listener; only then are the
//! records ARCHIVED and the state stored. A write that fails for a reason that can
//! pass (no leader, a timeout) leaves them in ARCHIVING, handed out again after
//! [`RETRY_DELAY`] at the share partition's next fetch or acknowledgement.
//!
//! One task writes, from a bounded queue: a full queue hands the records back to the
//! share partition for a later try, and the task ends with the node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_controller::CreateTopic;
use tidelog_records::{BatchBuilder, LogRecords};
use tokio::sync::watch;

use super::partition::DeadLetter;
use super::{ShareEntry, ShareKey};
use crate::context::{now_ms, Ctx};
use crate::metrics::connect_to_node;
use crate::replica::Role;
use crate::settings;

/// Jobs (one share partition's records each) waiting for the writer.
pub(crate) const QUEUE: usize = 256;
/// Records one job takes from a share partition.
pub(crate) const MAX_PER_JOB: usize = 64;
/// Bytes of keys and values one dead-letter batch carries (beyond its first record).
const MAX_BATCH_BYTES: usize = 512 * 1024;
/// How long a share partition waits before it hands out records whose write failed.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The bound on one write: connecting, producing, replication.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of the source log one read of the records to copy takes.
const SOURCE_READ_BYTES: usize = 1 << 20;
/// The largest Produce answer read from another node.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Kafka's `ShareGroupDLQStateManager` header names.
pub(crate) const HEADER_TOPIC: &str = "__dlq.errors.topic";
pub(crate) const HEADER_PARTITION: &str = "__dlq.errors.partition";
pub(crate) const HEADER_OFFSET: &str = "__dlq.errors.offset";
pub(crate) const HEADER_GROUP: &str = "__dlq.errors.group";
pub(crate) const HEADER_DELIVERY_COUNT: &str = "__dlq.errors.delivery.count";
pub(crate) const HEADER_MESSAGE: &str = "__dlq.errors.message";
/// The topic config that lets a topic be a dead-letter topic.
pub(crate) const TOPIC_ENABLE: &str = "errors.deadletterqueue.group.enable";

/// The keys and values of the records to copy, by offset.
pub(crate) type Sources = HashMap<i64, (Option<Bytes>, Option<Bytes>)>;

/// Records of one share partition to copy.
pub(crate) struct Job {
    pub(crate) key: ShareKey,
    pub(crate) entry: Arc<ShareEntry>,
    pub(crate) letters: Vec<DeadLetter>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DeadLetterError {
    /// The group's dead-letter topic breaks a rule: no copy is ever written.
    #[error("{0}")]
    Config(String),
    /// The write failed for a reason that can pass: it is tried again.
    #[error("{0}")]
    Retriable(String),
}

/// Where the copies of one share partition go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) topic: String,
    pub(crate) copy_record: bool,
}

/// The cluster's rules for a dead-letter topic (Kafka's broker configs of KIP-1191).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterRules {
    pub(crate) auto_create: bool,
    pub(crate) prefix: String,
}

/// Checks `target` of `group` against the rules, in Kafka's order; `Ok(true)` when the
/// topic exists, `Ok(false)` when it is to be created. `topic_enabled` is the topic's
/// `errors.deadletterqueue.group.enable` when it exists.
pub(crate) fn validate(
    group: &str,
    target: &Target,
    topic_enabled: Option<bool>,
    rules: &ClusterRules,
) -> Result<bool, DeadLetterError> {
    let topic = target.topic.as_str();
    if topic.starts_with("__") {
        return Err(DeadLetterError::Config(format!(
            "Configured DLQ topic name in share group: {group} cannot start with __, topic: {topic}."
        )));
    }
    if topic_enabled == Some(false) {
        return Err(DeadLetterError::Config(format!(
            "DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {topic}."
        )));
    }
    if topic_enabled.is_none() && !rules.auto_create {
        return Err(DeadLetterError::Config(format!(
            "DLQ topic does not exist and auto create is disabled on cluster for share group: {group}, topic: {topic}."
        )));
    }
    if !rules.prefix.is_empty() && !topic.starts_with(&rules.prefix) {
        return Err(DeadLetterError::Config(format!(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group}, topic: {topic}, prefix: {}.",
            rules.prefix
        )));
    }
    Ok(topic_enabled.is_some())
}

/// The dead-letter batch of `letters` (key and value from `sources` by offset), with
/// the offsets it holds; the letters past the byte budget are left for another batch.
pub(crate) fn build_batch(
    (group, topic, partition): (&str, &str, i32),
    letters: &[DeadLetter],
    sources: &Sources,
    now_ms: i64,
) -> Result<(Vec<u8>, Vec<i64>), DeadLetterError> {
    let mut builder = BatchBuilder::new();
    let mut offsets = Vec::new();
    let mut bytes = 0usize;
    for letter in letters {
        let (key, value) = sources.get(&letter.offset).cloned().unwrap_or_default();
        let size = key.as_ref().map_or(0, Bytes::len) + value.as_ref().map_or(0, Bytes::len);
        if !offsets.is_empty() && bytes.saturating_add(size) > MAX_BATCH_BYTES {
            break;
        }
        bytes = bytes.saturating_add(size);
        let headers = [
            (HEADER_TOPIC, Some(topic.to_string())),
            (HEADER_PARTITION, Some(partition.to_string())),
            (HEADER_OFFSET, Some(letter.offset.to_string())),
            (HEADER_GROUP, Some(group.to_string())),
            (
                HEADER_DELIVERY_COUNT,
                Some(letter.delivery_count.to_string()),
            ),
            (HEADER_MESSAGE, Some(letter.cause.message().to_string())),
        ];
        builder.push(now_ms, key.as_deref(), value.as_deref(), &headers);
        offsets.push(letter.offset);
    }
    let batch = builder
        .encode()
        .map_err(|e| DeadLetterError::Config(format!("dead-letter batch: {e}")))?;
    Ok((batch, offsets))
}

/// The writer: takes jobs from the share manager's queue until the node stops. A write
/// cut short by the stop leaves its records in ARCHIVING, for the next leader.
pub(crate) async fn run(ctx: Ctx, mut stop: watch::Receiver<bool>) {
    let Some(mut jobs) = ctx.shares.take_dead_letter_queue() else {
        return;
    };
    loop {
        let job = tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => job,
                None => return,
            },
            _ = stop.changed() => return,
        };
        tokio::select! {
            () = handle(&ctx, job) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn handle(ctx: &Ctx, job: Job) {
    let Job {
        key,
        entry,
        letters,
    } = job;
    // A share partition replaced meanwhile (a new leadership, reset offsets): the
    // state it starts from holds these records as ARCHIVING, and it writes them.
    let current = ctx
        .shares
        .current(&key, entry.leader_epoch)
        .is_some_and(|e| Arc::ptr_eq(&e, &entry));
    if !current {
        return;
    }
    let (group, topic_id, partition) = (&key.0, key.1, key.2);
    // ARCHIVING is stored before the copy is written (the acknowledgement path stored
    // it already; a lock that ran out or a closed session did not): a leader taking
    // over after the copy writes it again instead of delivering the record.
    if let Err(e) = super::fetch::persist(ctx, &key, &entry).await {
        tracing::warn!(group, %topic_id, partition, error = ?e, "share state not stored before a dead-letter write; it will be tried again");
        let offsets: Vec<i64> = letters.iter().map(|l| l.offset).collect();
        entry
            .lock()
            .dead_letter_failed(&offsets, Instant::now() + RETRY_DELAY);
        return;
    }
    let done = match write(ctx, &key, &letters).await {
        Ok(written) => {
            tracing::debug!(group, %topic_id, partition, records = written.len(), "records copied to the dead-letter topic");
            if let Some(topic) = ctx.metadata.image().topic_by_id(&topic_id) {
                ctx.metrics
                    .shares
                    .dead_lettered(group, &topic.name, partition, written.len());
            }
            written
        }
        Err(DeadLetterError::Config(why)) => {
            tracing::warn!(group, %topic_id, partition, error = %why, "records archived without a dead-letter copy");
            letters.iter().map(|l| l.offset).collect()
        }
        Err(DeadLetterError::Retriable(why)) => {
            tracing::warn!(group, %topic_id, partition, error = %why, "dead-letter write failed; it will be tried again");
            let offsets: Vec<i64> = letters.iter().map(|l| l.offset).collect();
            entry
                .lock()
                .dead_letter_failed(&offsets, Instant::now() + RETRY_DELAY);
            return;
        }
    };
    {
        let mut sp = entry.lock();
        sp.dead_lettered(&done);
        // Letters left out of the batch (the byte budget) go out with the next job.
        let left: Vec<i64> = letters
            .iter()
            .map(|l| l.offset)
            .filter(|o| !done.contains(o))
            .collect();
        if !left.is_empty() {
            sp.dead_letter_failed(&left, Instant::now());
        }
    }
    // ARCHIVED is stored: the copies are not written again by a later leader. A
    // failed store leaves that to the next acknowledgement's store (or, on a new
    // leader, writes the copies again).
    if let Err(e) = super::fetch::persist(ctx, &key, &entry).await {
        tracing::warn!(group, %topic_id, partition, error = ?e, "share state not stored after a dead-letter write");
    }
    entry.wake();
    ctx.shares.dispatch_dead_letters(&key, &entry);
}

/// Writes the copies of `letters` (as many as one batch takes); the offsets written.
async fn write(
    ctx: &Ctx,
    key: &ShareKey,
    letters: &[DeadLetter],
) -> Result<Vec<i64>, DeadLetterError> {
    let group = key.0.as_str();
    let Some((topic, copy_record)) = ctx.groups.config.group_configs.dead_letter_topic(group)
    else {
        return Err(DeadLetterError::Config(format!(
            "Configured DLQ topic name in share group: {group} is empty."
        )));
    };
    let target = Target { topic, copy_record };
    let settings = ctx.settings();
    let rules = ClusterRules {
        auto_create: settings.get(settings::ERRORS_DEADLETTERQUEUE_AUTO_CREATE_TOPICS_ENABLE),
        prefix: settings
            .get(settings::ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX)
            .trim()
            .to_string(),
    };
    let image = ctx.metadata.image();
    let enabled = image.topic(&target.topic).map(|t| {
        t.configs
            .get(TOPIC_ENABLE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    });
    let exists = validate(group, &target, enabled, &rules)?;
    if !exists {
        create_topic(ctx, &target.topic).await?;
    }
    let source = image
        .topic_by_id(&key.1)
        .map(|t| t.name.clone())
        .ok_or_else(|| DeadLetterError::Config(format!("source topic {} is gone", key.1)))?;
    let sources = if target.copy_record {
        read_sources(ctx, &source, key.2, letters)?
    } else {
        HashMap::new()
    };
    let (batch, offsets) = build_batch((group, &source, key.2), letters, &sources, now_ms())?;
    let image = ctx.metadata.image();
    let dlq = image.topic(&target.topic).ok_or_else(|| {
        DeadLetterError::Retriable(format!("topic {} not known yet", target.topic))
    })?;
    let count = dlq.partition_count().max(1);
    let index = key.2.rem_euclid(count);
    let leader = dlq.partitions.get(&index).map_or(-1, |p| p.leader);
    if leader < 0 {
        return Err(DeadLetterError::Retriable(format!(
            "{}-{index} has no leader",
            target.topic
        )));
    }
    if leader == ctx.node_id() {
        append_here(ctx, &target.topic, index, batch).await?;
    } else {
        produce_to(ctx, leader, &target.topic, index, batch).await?;
    }
    Ok(offsets)
}

/// Creates the missing dead-letter topic as Kafka does: the broker's partition count
/// and replication factor, the group flag set, CreateTime.
async fn create_topic(ctx: &Ctx, topic: &str) -> Result<(), DeadLetterError> {
    let image = ctx.metadata.image();
    let live = i64::try_from(image.live_broker_ids().len())
        .unwrap_or(1)
        .max(1);
    let wanted = ctx.config.get(settings::DEFAULT_REPLICATION_FACTOR);
    let request = CreateTopic {
        name: topic.to_string(),
        num_partitions: -1,
        replication_factor: i16::try_from(wanted.clamp(1, live)).unwrap_or(1),
        assignments: Vec::new(),
        configs: vec![
            (TOPIC_ENABLE.to_string(), Some("true".to_string())),
            (
                "message.timestamp.type".to_string(),
                Some("CreateTime".to_string()),
            ),
        ],
    };
    match ctx.metadata.create_topic(request, false).await {
        Ok(_) => {
            tracing::info!(topic, "created the dead-letter topic");
            Ok(())
        }
        // Created by another write meanwhile.
        Err(_) if ctx.metadata.image().topic(topic).is_some() => Ok(()),
        Err(e) => Err(DeadLetterError::Retriable(format!(
            "creating dead-letter topic {topic}: error {}",
            e.error_code()
        ))),
    }
}

/// The keys and values of `letters` from the source partition this node leads;
/// records gone from the log (retention) are copied as headers alone.
fn read_sources(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    letters: &[DeadLetter],
) -> Result<Sources, DeadLetterError> {
    let p = ctx
        .replicas
        .get(topic, partition)
        .ok_or_else(|| DeadLetterError::Retriable(format!("{topic}-{partition} not here")))?;
    let mut found: Sources = HashMap::new();
    for letter in letters {
        if found.contains_key(&letter.offset) {
            continue;
        }
        let read = p
            .read(letter.offset, SOURCE_READ_BYTES, false)
            .map_err(|e| DeadLetterError::Retriable(format!("reading {topic}-{partition}: {e}")))?;
        let Some(slice) = read.slice else {
            continue;
        };
        let bytes = slice
            .read_to_vec()
            .map_err(|e| DeadLetterError::Retriable(format!("reading {topic}-{partition}: {e}")))?;
        for record in LogRecords::new(Bytes::from(bytes)).flatten() {
            if letters.iter().any(|l| l.offset == record.offset) {
                found.insert(record.offset, (record.key, record.value));
            }
        }
    }
    Ok(found)
}

/// Appends the batch to the dead-letter partition this node leads and waits until it
/// is replicated (acks=all).
async fn append_here(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    batch: Vec<u8>,
) -> Result<(), DeadLetterError> {
    let retriable = |why: String| DeadLetterError::Retriable(format!("{topic}-{partition}: {why}"));
    let p = ctx
        .replicas
        .get(topic, partition)
        .ok_or_else(|| retriable("not here yet".into()))?;
    if p.role() != Role::Leader {
        return Err(retriable("not the leader".into()));
    }
    p.check_min_isr().map_err(|e| retriable(format!("{e:?}")))?;
    tokio::time::timeout(WRITE_TIMEOUT, p.ready_for_writes())
        .await
        .map_err(|_| retriable("not ready for writes".into()))?;
    let mut bytes = BytesMut::from(&batch[..]);
    let (done, sync) = p
        .append_for_coordinator(&mut bytes, now_ms(), false)
        .map_err(|e| match ResponseError::try_from_code(e.code()) {
            Some(code) if !code.is_retriable() => {
                DeadLetterError::Config(format!("{topic}-{partition}: {e}"))
            }
            _ => retriable(e.to_string()),
        })?;
    if let Some(sync) = sync {
        tokio::task::spawn_blocking(move || sync.wait())
            .await
            .map_err(|e| retriable(e.to_string()))?
            .map_err(|e| retriable(e.to_string()))?;
    }
    p.wait_replicated(done.end_offset, done.leader_epoch, WRITE_TIMEOUT)
        .await
        .map_err(|e| retriable(format!("{e:?}")))
}

/// Produces the batch (acks=all) to `leader`, the leader of the dead-letter partition.
async fn produce_to(
    ctx: &Ctx,
    leader: i32,
    topic: &str,
    partition: i32,
    batch: Vec<u8>,
) -> Result<(), DeadLetterError> {
    let retriable = |why: String| DeadLetterError::Retriable(format!("{topic}-{partition}: {why}"));
    let mut peer = connect_to_node(
        &ctx.metadata,
        &ctx.replicas,
        ctx.node_id(),
        leader,
        "dead-letter",
        WRITE_TIMEOUT,
    )
    .await
    .map_err(|e| retriable(format!("node {leader}: {e}")))?;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(i32::try_from(WRITE_TIMEOUT.as_millis()).unwrap_or(i32::MAX))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])]);
    // v9: topics by name, the newest version before topic ids.
    let response: ProduceResponse = peer
        .call(
            ApiKey::Produce,
            9,
            &request,
            MAX_RESPONSE_BYTES,
            WRITE_TIMEOUT + Duration::from_secs(5),
        )
        .await
        .map_err(|e| retriable(e.to_string()))?;
    let code = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
    if code == 0 {
        return Ok(());
    }
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) if e.is_retriable() || e == ResponseError::UnknownServerError => {
            Err(retriable(format!("{e:?}")))
        }
        Some(e) => Err(DeadLetterError::Config(format!(
            "{topic}-{partition}: produce refused with {e:?}"
        ))),
    }
}

#[cfg(test)]
#[path = "dead_letter_tests.rs"]
mod tests;
