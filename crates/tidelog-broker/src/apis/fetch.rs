//! Fetch: whole batches from each partition, up to the high watermark (or the last
//! stable offset for read_committed), with long poll: a fetch that finds fewer than
//! `min_bytes` is parked on its partitions and answered the moment an append brings
//! enough, or when `max_wait_ms` runs out.
//!
//! A fetch carrying a replica id (a follower; v15+ in ReplicaState) must come from a
//! broker registered in the metadata image, else every partition is refused with
//! CLUSTER_AUTHORIZATION_FAILED. A follower's fetch offset is its log end offset: the
//! leader records it (moving the high watermark), answers the diverging epoch when the
//! follower's last fetched epoch does not match its own log, and reads up to its log
//! end, not the high watermark. Consumers read only from the leader, below the HW.
//!
//! v17 adds the follower's directory id (KIP-853, used by KRaft voters only; ignored
//! here). v18 (KIP-1166) carries the follower's high watermark: a follower fetch is
//! answered at once, without waiting for `min_bytes`, when the leader's high watermark
//! of a partition is above the follower's, so followers learn a new high watermark
//! without waiting out the long poll (consumers send no high watermark: i64::MAX).
//!
//! Incremental fetch sessions are declined: every response carries session id 0, which
//! tells clients to keep sending full fetch requests.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, EpochEndOffset};
use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::fetch_encode::{
    encode_fetch_response, FetchPartitionParts, FetchResponseParts, FetchTopicParts, RecordsPayload,
};
use tidelog_protocol::{Chunk, DecodedHeader, ProtocolError};
use tidelog_storage::{AbortedTxn, FileSlice};
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::Request;
use crate::context::{now_ms, Ctx};
use crate::net::{Reply, Session};
use crate::quota::{self, QuotaKind};
use crate::replica::{PartitionError, Role};
use crate::settings;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 4, max: 18 };

/// The longest a fetch may be parked, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(300);

/// One partition a fetch asks for, resolved to a topic name.
struct Wanted {
    topic: Option<String>,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    /// Replica fetches: where the follower's log starts.
    log_start_offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
    /// Replica fetches: where the follower's log diverges from ours.
    diverging: Option<(i32, i64)>,
    /// Replica fetches: why this node cannot serve the follower (e.g. it is no
    /// replica of the partition).
    replica_error: Option<i16>,
    /// Replica fetches from v18: the follower's high watermark (i64::MAX: not sent).
    follower_high_watermark: i64,
    /// TOPIC_AUTHORIZATION_FAILED: a consumer without READ on the topic.
    denied: Option<i16>,
}

struct FetchPlan {
    header: DecodedHeader,
    wanted: Vec<Wanted>,
    read_committed: bool,
    min_bytes: usize,
    max_bytes: usize,
    deadline: Instant,
    /// The follower's broker id, or -1 for a consumer.
    replica_id: i32,
    /// Set when the whole request is refused (a replica id that is not a broker).
    refused: Option<i16>,
    /// A consumer's fetch: its connection and client id, whose consumer_byte_rate
    /// quota the answer is charged to.
    quota: Option<(Arc<Session>, Option<String>)>,
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: FetchRequest = req.decode()?;
    let version = req.version();
    let image = ctx.metadata.image();
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let refused = (replica_id >= 0 && image.broker(replica_id).is_none()).then(|| {
        tracing::warn!(
            replica_id,
            "replica fetch from a node that is not a registered broker refused"
        );
        ResponseError::ClusterAuthorizationFailed.code()
    });
    // A follower needs CLUSTER_ACTION (else every partition answers
    // TOPIC_AUTHORIZATION_FAILED, as Kafka's); a consumer READ on each topic.
    let access = req.access(ctx);
    let refused = refused.or_else(|| {
        (replica_id >= 0 && !access.cluster(AclOperation::ClusterAction))
            .then(|| ResponseError::TopicAuthorizationFailed.code())
    });
    let now = now_ms();
    let lag_max_ms = ctx.config.get(settings::REPLICA_LAG_TIME_MAX_MS).max(1);
    let mut wanted = Vec::new();
    for topic in &request.topics {
        let name = if version >= 13 {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.topic.0.to_string())
        };
        let denied = (replica_id < 0
            && name
                .as_deref()
                .is_some_and(|n| !access.topic(AclOperation::Read, n)))
        .then(|| ResponseError::TopicAuthorizationFailed.code());
        for p in &topic.partitions {
            let mut w = Wanted {
                denied,
                topic: name.clone(),
                topic_id: topic.topic_id,
                partition: p.partition,
                offset: p.fetch_offset,
                log_start_offset: p.log_start_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                current_leader_epoch: p.current_leader_epoch,
                diverging: None,
                replica_error: None,
                follower_high_watermark: if version >= 18 {
                    p.high_watermark
                } else {
                    i64::MAX
                },
            };
            if replica_id >= 0 && refused.is_none() {
                let last_epoch = if version >= 12 {
                    p.last_fetched_epoch
                } else {
                    -1
                };
                follower_fetched(ctx, &mut w, replica_id, last_epoch, now, lag_max_ms);
            }
            wanted.push(w);
        }
    }
    let wait =
        Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT_CAP);
    let mut max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    let client_id = req.header.client_id.as_ref().map(|c| c.to_string());
    let quota_client = if replica_id >= 0 {
        if refused.is_none() {
            // A follower's connection: replication is not under client quotas.
            req.session.inter_broker.store(true, Ordering::Relaxed);
        }
        None
    } else {
        // Kafka bounds a consumer's fetch by what its quota allows in the window.
        let user = quota::quota_user(&req.session.principal);
        if let Some(cap) =
            ctx.quotas
                .max_fetch_bytes(&image, user, client_id.as_deref().unwrap_or(""))
        {
            max_bytes = if max_bytes == 0 {
                cap
            } else {
                max_bytes.min(cap)
            };
        }
        Some((Arc::clone(&req.session), client_id))
    };
    let plan = FetchPlan {
        header: req.header,
        wanted,
        read_committed: request.isolation_level == 1,
        min_bytes: usize::try_from(request.min_bytes).unwrap_or(0),
        max_bytes,
        deadline: Instant::now() + wait,
        replica_id,
        refused,
        quota: quota_client,
    };
    let ctx = Arc::clone(ctx);
    Ok(Reply::Later(Box::pin(async move {
        answer_when_ready(ctx, plan).await
    })))
}

async fn answer_when_ready(ctx: Ctx, plan: FetchPlan) -> Reply {
    let mut shutdown = ctx.shutdown.clone();
    loop {
        // Park before reading, so an append between the read and the wait still wakes us.
        let notify = Arc::new(Notify::new());
        for w in &plan.wanted {
            if let Some(p) = w
                .topic
                .as_deref()
                .and_then(|t| ctx.replicas.get(t, w.partition))
            {
                p.park(&notify);
            }
        }
        let (response, files, bytes, any_error) = read_all(&ctx, &plan);
        let done = bytes >= plan.min_bytes
            || any_error
            || follower_high_watermark_behind(&ctx, &plan)
            || Instant::now() >= plan.deadline
            || *shutdown.borrow();
        if done {
            if plan.replica_id >= 0 && plan.refused.is_none() {
                followers_idle_poll(&ctx, &plan);
            }
            let encoded = encode_fetch_response(
                plan.header.correlation_id,
                plan.header.api_version,
                &response,
            );
            let chunks = match encoded {
                Ok(chunks) => chunks,
                Err(e) => {
                    tracing::error!(error = %e, "cannot encode fetch response");
                    return Reply::Close;
                }
            };
            if let Some(throttled) = throttled_answer(&ctx, &plan, &chunks) {
                return throttled;
            }
            count_fetch(&ctx, &plan, &response);
            return Reply::Chunks(chunks, files);
        }
        tokio::select! {
            _ = notify.notified() => {}
            _ = tokio::time::sleep_until(plan.deadline) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Charges a consumer's answer to its consumer_byte_rate quota. Over it, the answer
/// is Kafka's throttled one (no partitions, `throttle_time_ms` set: what was read is
/// dropped and taken back from the sensor) and the connection is muted.
fn throttled_answer(ctx: &Ctx, plan: &FetchPlan, chunks: &[Chunk]) -> Option<Reply> {
    let (session, client_id) = plan.quota.as_ref()?;
    let size: u64 = chunks
        .iter()
        .map(|c| match c {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::External { len, .. } => *len,
        })
        .sum();
    let recorded = quota::charge(
        ctx,
        session,
        QuotaKind::Fetch,
        client_id.as_deref(),
        size as f64,
    );
    if recorded.throttle_ms == 0 {
        return None;
    }
    ctx.quotas.unrecord(&recorded);
    let empty = FetchResponseParts {
        throttle_time_ms: recorded.throttle_time_ms(),
        ..FetchResponseParts::default()
    };
    Some(
        match encode_fetch_response(plan.header.correlation_id, plan.header.api_version, &empty) {
            Ok(chunks) => Reply::Chunks(chunks, Vec::new()),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode fetch response");
                Reply::Close
            }
        },
    )
}

/// Whether a follower (v18+) holds an older high watermark than ours for one of its
/// partitions: then it is answered now, to learn the new one (KIP-1166).
fn follower_high_watermark_behind(ctx: &Ctx, plan: &FetchPlan) -> bool {
    if plan.replica_id < 0 || plan.refused.is_some() {
        return false;
    }
    plan.wanted
        .iter()
        .filter(|w| w.follower_high_watermark != i64::MAX)
        .any(|w| {
            w.topic
                .as_deref()
                .and_then(|t| ctx.replicas.get(t, w.partition))
                .and_then(|p| p.offsets().ok())
                .is_some_and(|o| o.high_watermark > w.follower_high_watermark)
        })
}

/// Reads every wanted partition once. Returns the response (record bytes stay in the
/// segment files, named by index into the returned slices), the record bytes in it, and
/// whether any partition carried an error (errors are answered at once).
fn read_all(ctx: &Ctx, plan: &FetchPlan) -> (FetchResponseParts, Vec<FileSlice>, usize, bool) {
    let version = plan.header.api_version;
    let mut remaining = if plan.max_bytes == 0 {
        usize::MAX
    } else {
        plan.max_bytes
    };
    let mut total = 0usize;
    let mut any_error = false;
    let mut files = Vec::new();
    let mut topics: Vec<FetchTopicParts> = Vec::new();
    for w in &plan.wanted {
        let mut data = FetchPartitionParts {
            partition_index: w.partition,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: plan.read_committed.then(Vec::new),
            // Empty, never null: librdkafka rejects a whole response with a null record set.
            records: RecordsPayload::Bytes(bytes::Bytes::new()),
            ..FetchPartitionParts::default()
        };
        let read = match plan.refused.or(w.denied) {
            Some(code) => Err((code, None)),
            None => read_one(ctx, plan, w, remaining, total == 0),
        };
        match read {
            Ok((slice, hw, lso, log_start, aborted)) => {
                if let Some((epoch, end_offset)) = w.diverging {
                    // Answered at once: the follower truncates before fetching again.
                    any_error = true;
                    data.diverging_epoch = EpochEndOffset::default()
                        .with_epoch(epoch)
                        .with_end_offset(end_offset);
                }
                data.high_watermark = hw;
                data.last_stable_offset = lso;
                data.log_start_offset = log_start;
                if plan.read_committed {
                    data.aborted_transactions = Some(
                        aborted
                            .iter()
                            .map(|t| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(t.producer_id))
                                    .with_first_offset(t.first_offset)
                            })
                            .collect(),
                    );
                }
                data.records = match slice {
                    Some(slice) => {
                        let len = usize::try_from(slice.len).unwrap_or(usize::MAX);
                        total = total.saturating_add(len);
                        remaining = remaining.saturating_sub(len);
                        files.push(slice.clone());
                        RecordsPayload::External {
                            id: files.len() - 1,
                            len: slice.len,
                        }
                    }
                    None => RecordsPayload::Bytes(bytes::Bytes::new()),
                };
            }
            Err((code, offsets)) => {
                any_error = true;
                data.error_code = code;
                if let Some((hw, log_start)) = offsets {
                    data.high_watermark = hw;
                    data.last_stable_offset = hw;
                    data.log_start_offset = log_start;
                }
            }
        }
        let same_topic = topics.last().is_some_and(|t| {
            if version >= 13 {
                t.topic_id == w.topic_id
            } else {
                w.topic.as_deref() == Some(t.name.0.as_str())
            }
        });
        if !same_topic {
            let name = if version >= 13 {
                String::new()
            } else {
                w.topic.clone().unwrap_or_default()
            };
            topics.push(FetchTopicParts {
                name: TopicName(StrBytes::from_string(name)),
                topic_id: if version >= 13 {
                    w.topic_id
                } else {
                    Uuid::nil()
                },
                partitions: Vec::new(),
            });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(data);
        }
    }
    let response = FetchResponseParts {
        topics,
        ..FetchResponseParts::default()
    };
    (response, files, total, any_error)
}

/// Counts the final response: record bytes per topic, error codes per partition. The
/// response lists one partition per wanted entry, in the same order.
fn count_fetch(ctx: &Ctx, plan: &FetchPlan, response: &FetchResponseParts) {
    let answered = response.topics.iter().flat_map(|t| t.partitions.iter());
    for (w, data) in plan.wanted.iter().zip(answered) {
        ctx.metrics
            .requests
            .error_code(kafka_protocol::messages::ApiKey::Fetch, data.error_code);
        if let (Some(topic), RecordsPayload::External { len, .. }) = (&w.topic, &data.records) {
            ctx.metrics.topics.fetched(topic, *len);
        }
    }
}

/// A partition's error code, with (high watermark, log start) where they are known.
type ReadError = (i16, Option<(i64, i64)>);

/// What one partition's read produced.
type ReadOk = (Option<FileSlice>, i64, i64, i64, Vec<AbortedTxn>);

/// (records, high watermark, last stable offset, log start, aborted transactions in the
/// range for read_committed) or a Kafka error.
fn read_one(
    ctx: &Ctx,
    plan: &FetchPlan,
    w: &Wanted,
    remaining: usize,
    first: bool,
) -> Result<ReadOk, ReadError> {
    let version = plan.header.api_version;
    let read_committed = plan.read_committed;
    let unknown = if version >= 13 {
        ResponseError::UnknownTopicId
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    let topic = w.topic.as_deref().ok_or((unknown.code(), None))?;
    let p = ctx
        .replicas
        .get(topic, w.partition)
        .ok_or((ResponseError::UnknownTopicOrPartition.code(), None))?;
    if w.current_leader_epoch >= 0 {
        let ours = p.leader_epoch();
        if w.current_leader_epoch < ours {
            return Err((ResponseError::FencedLeaderEpoch.code(), None));
        }
        if w.current_leader_epoch > ours {
            return Err((ResponseError::UnknownLeaderEpoch.code(), None));
        }
    }
    if p.role() != Role::Leader {
        return Err((ResponseError::NotLeaderOrFollower.code(), None));
    }
    if let Some(code) = w.replica_error {
        return Err((code, None));
    }
    if w.diverging.is_some() {
        return Ok((None, -1, -1, -1, Vec::new()));
    }
    let limit = w.max_bytes.min(remaining);
    let read = if plan.replica_id >= 0 {
        p.read_for_follower(w.offset, limit)
    } else {
        p.read(w.offset, limit, read_committed)
    };
    let read = read.map_err(|e| match e {
        PartitionError::Storage(_) => {
            let offsets = p.offsets().ok().map(|o| (o.high_watermark, o.log_start));
            (e.code(), offsets)
        }
        other => (other.code(), None),
    })?;
    // Only the first partition with data may exceed the limit (by one whole batch).
    let slice = read
        .slice
        .filter(|slice| first || usize::try_from(slice.len).is_ok_and(|len| len <= limit));
    Ok((
        slice,
        read.high_watermark,
        read.last_stable_offset,
        read.log_start_offset,
        read.aborted,
    ))
}

/// A follower's fetch is answered: every partition where it still holds the leader's
/// whole log counts it caught up now, not only as of when the fetch arrived (a long poll
/// on an idle partition must not age a follower).
fn followers_idle_poll(ctx: &Ctx, plan: &FetchPlan) {
    let now = now_ms();
    for w in &plan.wanted {
        if w.diverging.is_some() || w.replica_error.is_some() {
            continue;
        }
        if let Some(p) = w
            .topic
            .as_deref()
            .and_then(|t| ctx.replicas.get(t, w.partition))
        {
            p.record_follower_idle_poll(plan.replica_id, w.offset, now);
        }
    }
}

/// A follower fetched `w`: unless its epoch is stale or its log diverges from ours,
/// its fetch offset is its log end offset, which the leader records (the HW may move,
/// a caught-up follower is proposed for the ISR).
fn follower_fetched(
    ctx: &Ctx,
    w: &mut Wanted,
    replica_id: i32,
    last_epoch: i32,
    now: i64,
    lag_max_ms: i64,
) {
    let Some(p) = w
        .topic
        .as_deref()
        .and_then(|t| ctx.replicas.get(t, w.partition))
    else {
        return;
    };
    if w.current_leader_epoch >= 0 && w.current_leader_epoch != p.leader_epoch() {
        return;
    }
    w.diverging = p.diverging_epoch(last_epoch, w.offset);
    if w.diverging.is_some() {
        return;
    }
    match p.record_follower_fetch(replica_id, w.offset, w.log_start_offset, now, lag_max_ms) {
        Ok(true) => ctx.replicas.isr_wake.notify_one(),
        Ok(false) => {}
        Err(e) => w.replica_error = Some(e.code()),
    }
}
