//! Produce: validate and append each partition's batches, answer with base offsets.
//!
//! The append happens while the connection's reader is still on this request, so the
//! batches of one connection land in the order they were sent.
//!
//! Every record of every batch is checked before the append (by the log: see
//! `tidelog_storage::Log::append`); a refused batch writes nothing for its partition and
//! answers CORRUPT_MESSAGE, INVALID_RECORD or MESSAGE_TOO_LARGE. From v8 the answer
//! carries `error_message` and, when particular records were at fault (keyless records
//! on a compacted topic, an offset delta out of sequence), `record_errors` naming them
//! by their position in the batch (KIP-467).
//!
//! acks=all (-1): refused with NOT_ENOUGH_REPLICAS before appending when the ISR is
//! smaller than min.insync.replicas; after appending, the answer waits (a delayed
//! reply, no thread blocked) until the high watermark passes every partition's batch:
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below min.insync.replicas
//! meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT at the
//! request's timeout_ms. acks=1 answers after the local append.
//!
//! Transactional batches go only into a partition of the producer's open transaction.
//! Up to v11 the client added the partition with AddPartitionsToTxn and the coordinator
//! verifies it. v12 is v11 on the wire but, as Kafka's brokers read it, a TV2 client's
//! (KIP-890 part 2: a client may send v12+ in a transaction only with TV2): the produce
//! itself adds the partition to the transaction (opening it), here or with
//! AddPartitionsToTxn v5 to the coordinator's node, so the client sends no
//! AddPartitionsToTxn. The coordinator's "not now" answers (a decision being written,
//! no coordinator) become NOT_ENOUGH_REPLICAS there, retriable for every client, as
//! Kafka maps them. v13 names topics by id (KIP-516): an id this node does not know
//! answers UNKNOWN_TOPIC_ID, and answers carry the id, not the name.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::INTERNAL_TOPICS;
use tidelog_protocol::ProtocolError;
use tidelog_storage::{DurabilityHandle, PendingSync, StorageError};

use super::{later_response, Request};
use crate::context::{now_ms, Ctx};
use crate::metrics::{Metrics, StorageOperation};
use crate::net::Reply;
use crate::quota::{self, QuotaKind};
use crate::replica::{replication_outcome, Appended, Partition, PartitionError};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 3, max: 13 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    // Kafka's produce quota counts the request's size.
    let request_size = req.body.len();
    let request: ProduceRequest = req.decode()?;
    let acks = request.acks;
    // Partitions whose answer waits for replication: (topic, partition) positions in
    // the response, the partition, and what to wait for.
    let mut waits: Vec<(usize, usize, Arc<Partition>, Appended)> = Vec::new();
    // Partitions whose answer waits for the fdatasync `flush.messages` asked for.
    let mut syncs: Vec<(usize, usize, PendingSync)> = Vec::new();
    let txn_id = request.transactional_id.as_ref().map(|t| t.0.to_string());
    // Error messages exist on the wire from v8.
    let with_messages = req.version() >= 8;
    let by_id = req.version() >= 13;
    let implicit_add = req.version() >= 12;
    let image = by_id.then(|| ctx.metadata.image());
    // WRITE on the transactional id (every partition refused without it), then WRITE
    // on each topic: nothing is appended where either is missing.
    let access = req.access(ctx);
    let txn_refused = txn_id
        .as_deref()
        .is_some_and(|id| !access.transactional_id(AclOperation::Write, id));
    // Each topic's name (None: an id this node does not know) and whether this
    // principal may write to it, resolved once for both passes below.
    let names: Vec<(Option<String>, bool)> = request
        .topic_data
        .iter()
        .map(|topic| {
            let name = match &image {
                Some(image) => image.topic_by_id(&topic.topic_id).map(|t| t.name.clone()),
                None => Some(topic.name.0.to_string()),
            };
            let writable = name
                .as_deref()
                .is_some_and(|n| access.topic(AclOperation::Write, n));
            (name, writable)
        })
        .collect();
    if !txn_refused {
        let writable = request
            .topic_data
            .iter()
            .zip(&names)
            .filter(|(_, (_, writable))| *writable)
            .flat_map(|(topic, (name, _))| {
                topic
                    .partition_data
                    .iter()
                    .filter_map(move |data| ctx.replicas.get(name.as_deref()?, data.index))
            });
        let marked = still_marked(writable);
        if marked.len() > 1 {
            ready_together(marked).await;
        }
    }
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for (topic, (name, writable)) in request.topic_data.into_iter().zip(names) {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let result = if !(-1..=1).contains(&acks) {
                Err(Refusal::code(ResponseError::InvalidRequiredAcks.code()))
            } else if txn_refused {
                Err(Refusal::code(
                    ResponseError::TransactionalIdAuthorizationFailed.code(),
                ))
            } else if name.is_some() && !writable {
                Err(Refusal::code(
                    ResponseError::TopicAuthorizationFailed.code(),
                ))
            } else if let Some(name) = &name {
                append(
                    ctx,
                    name,
                    data.index,
                    data.records.as_deref(),
                    txn_id.as_deref(),
                    acks == -1,
                    implicit_add,
                )
                .await
            } else {
                Err(Refusal::code(ResponseError::UnknownTopicId.code()))
            };
            if let Err(Refusal { code, .. }) = &result {
                ctx.metrics.requests.error_code(ApiKey::Produce, *code);
                if *code == ResponseError::KafkaStorageError.code() {
                    ctx.metrics.storage.failed(StorageOperation::Append);
                }
            }
            partitions.push(match result {
                Ok((p, done, sync)) => {
                    if let Some(sync) = sync {
                        syncs.push((topics.len(), partitions.len(), sync));
                    }
                    if acks == -1 {
                        waits.push((topics.len(), partitions.len(), p, done));
                    }
                    PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_base_offset(done.base_offset)
                        .with_log_append_time_ms(done.log_append_time_ms)
                        .with_log_start_offset(done.log_start_offset)
                }
                Err(refusal) => refusal.response(data.index, with_messages),
            });
        }
        let answered = if by_id {
            TopicProduceResponse::default().with_topic_id(topic.topic_id)
        } else {
            TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_string(name.unwrap_or_default())))
        };
        topics.push(answered.with_partition_responses(partitions));
    }
    // Over its producer_byte_rate the client is told to pause, and its connection is
    // muted for as long (with acks=0 there is no answer: only the mute).
    let throttle = quota::charge(
        ctx,
        &req.session,
        QuotaKind::Produce,
        req.header.client_id.as_deref(),
        request_size as f64,
    )
    .throttle_time_ms();
    if acks == 0 {
        if !syncs.is_empty() {
            // Nobody waits for the answer, but flush.messages still holds.
            tokio::task::spawn_blocking(move || wait_for_syncs(syncs));
        }
        return Ok(Reply::Nothing);
    }
    // Already replicated (a cluster of one: the append moved the HW) or already
    // decided: answered now, without a delayed reply.
    waits.retain(|(t, i, p, done)| {
        let decided =
            replication_outcome(&p.hw_watch().borrow(), done.end_offset, done.leader_epoch);
        match decided {
            Some(Ok(())) => false,
            Some(Err(code)) => {
                fail_partition(&ctx.metrics, &mut topics, *t, *i, code.code());
                false
            }
            None => true,
        }
    });
    if waits.is_empty() && syncs.is_empty() {
        return req.respond(
            &ProduceResponse::default()
                .with_throttle_time_ms(throttle)
                .with_responses(topics),
        );
    }
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let ctx = Arc::clone(ctx);
    let header = req.header;
    Ok(Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        if !syncs.is_empty() {
            let positions: Vec<(usize, usize)> = syncs.iter().map(|(t, i, _)| (*t, *i)).collect();
            let failed = tokio::task::spawn_blocking(move || wait_for_syncs(syncs))
                .await
                .unwrap_or(positions);
            for (t, i) in failed {
                ctx.metrics.storage.failed(StorageOperation::Append);
                fail_partition(
                    &ctx.metrics,
                    &mut topics,
                    t,
                    i,
                    ResponseError::KafkaStorageError.code(),
                );
            }
        }
        for (t, i, p, done) in waits {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let outcome = p
                .wait_replicated(done.end_offset, done.leader_epoch, left)
                .await;
            if let Err(code) = outcome {
                fail_partition(&ctx.metrics, &mut topics, t, i, code.code());
            }
        }
        later_response(
            &ctx.metrics,
            &header,
            &ProduceResponse::default()
                .with_throttle_time_ms(throttle)
                .with_responses(topics),
        )
    })))
}

/// Waits for each deferred fdatasync (one covers every append before it, so most return
/// at once); returns the response positions whose sync failed.
fn wait_for_syncs(syncs: Vec<(usize, usize, PendingSync)>) -> Vec<(usize, usize)> {
    syncs
        .into_iter()
        .filter_map(|(t, i, sync)| match sync.wait() {
            Ok(()) => None,
            Err(e) => {
                tracing::error!(error = %e, "fdatasync for flush.messages failed");
                Some((t, i))
            }
        })
        .collect()
}

/// Turns an appended partition's answer into a replication failure.
fn fail_partition(
    metrics: &Metrics,
    topics: &mut [TopicProduceResponse],
    topic: usize,
    partition: usize,
    code: i16,
) {
    let Some(r) = topics
        .get_mut(topic)
        .and_then(|t| t.partition_responses.get_mut(partition))
    else {
        return;
    };
    metrics.requests.error_code(ApiKey::Produce, code);
    r.error_code = code;
    r.base_offset = -1;
    r.log_append_time_ms = -1;
    r.log_start_offset = -1;
}

/// Why a partition's batches were not appended, as its response says it.
struct Refusal {
    code: i16,
    message: Option<String>,
    /// The records at fault, by position in their batch (KIP-467).
    record_errors: Vec<tidelog_storage::RecordError>,
}

impl Refusal {
    fn code(code: i16) -> Self {
        Refusal {
            code,
            message: None,
            record_errors: Vec::new(),
        }
    }

    fn with_message(code: i16, message: impl Into<String>) -> Self {
        Refusal {
            message: Some(message.into()),
            ..Refusal::code(code)
        }
    }

    fn from_partition_error(e: &PartitionError) -> Self {
        let record_errors = match e {
            PartitionError::Storage(
                StorageError::InvalidRecord(refusal) | StorageError::InvalidTimestamp(refusal),
            ) => refusal.record_errors.clone(),
            _ => Vec::new(),
        };
        Refusal {
            record_errors,
            ..Refusal::with_message(e.code(), e.to_string())
        }
    }

    /// The partition's answer; messages and record errors exist on the wire from v8.
    fn response(self, index: i32, with_messages: bool) -> PartitionProduceResponse {
        let response = PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(self.code)
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1);
        if !with_messages {
            return response;
        }
        let record_errors = self
            .record_errors
            .into_iter()
            .map(|e| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(e.batch_index)
                    .with_batch_index_error_message(Some(StrBytes::from_string(e.message)))
            })
            .collect();
        response
            .with_error_message(self.message.map(StrBytes::from_string))
            .with_record_errors(record_errors)
    }
}

/// The first writes after a clean start reach many partitions in one request: their
/// clean-shutdown markers go in one batch (unlinked, then one `syncfs`) on a blocking
/// thread, rather than one directory fsync per partition as each is appended to. A
/// partition left with its marker (an error) removes it by itself before its append.
async fn ready_together(partitions: Vec<Arc<Partition>>) {
    let removed = tokio::task::spawn_blocking(move || {
        let handles: Vec<DurabilityHandle> =
            partitions.iter().map(|p| p.durability().clone()).collect();
        let outcomes = tidelog_storage::remove_clean_shutdown_markers(&handles);
        let mut failed = 0;
        for (p, outcome) in partitions.iter().zip(outcomes) {
            if let Err(e) = outcome {
                p.noted(e);
                failed += 1;
            }
        }
        if failed > 0 {
            tracing::warn!(failed, "removing clean-shutdown markers in a batch failed");
        }
    })
    .await;
    if let Err(e) = removed {
        tracing::warn!(error = %e, "removing clean-shutdown markers in a batch panicked");
    }
}

/// Those `partitions` that still have their clean-shutdown marker.
fn still_marked(partitions: impl Iterator<Item = Arc<Partition>>) -> Vec<Arc<Partition>> {
    partitions
        .filter(|p| p.durability().clean_shutdown_marker_present())
        .collect()
}

type AppendResult = Result<(Arc<Partition>, Appended, Option<PendingSync>), Refusal>;

async fn append(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    records: Option<&[u8]>,
    transactional_id: Option<&str>,
    acks_all: bool,
    implicit_add: bool,
) -> AppendResult {
    if INTERNAL_TOPICS.contains(&topic) {
        // Only the coordinators write their records there (not through Produce): a
        // client's bytes would be replayed as group or transaction state. Kafka's answer.
        return Err(Refusal::with_message(
            ResponseError::InvalidTopicException.code(),
            format!("Cannot append to internal topic {topic}"),
        ));
    }
    let Some(p) = ctx.replicas.get(topic, partition) else {
        return Err(Refusal::code(ResponseError::UnknownTopicOrPartition.code()));
    };
    if acks_all {
        p.check_min_isr().map_err(|e| Refusal::code(e.code()))?;
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err(Refusal::with_message(
            ResponseError::InvalidRecord.code(),
            "no records",
        ));
    };
    ctx.metrics.topics.produced_batches(topic, records);
    p.ready_for_writes().await;
    let mut batches = BytesMut::from(records);
    // Transactional batches only into a partition of the producer's open transaction
    // (checked with the coordinator, which cannot decide the transaction meanwhile).
    let transactional = tidelog_storage::BatchHeader::new(&batches)
        .ok()
        .filter(|h| h.is_transactional())
        .map(|h| (h.producer_id(), h.producer_epoch()));
    let appended = match transactional {
        Some((producer_id, epoch)) => {
            // The guard keeps a marker written meanwhile from being overtaken.
            let guard = p.begin_verification(producer_id);
            let id = transactional_id.unwrap_or("");
            let verified = if implicit_add {
                ctx.txns
                    .add_implicitly(id, (producer_id, epoch), topic, partition)
                    .await
                    .map_err(|e| {
                        let code = if e.is_retriable() {
                            ResponseError::NotEnoughReplicas.code()
                        } else {
                            e.code(false)
                        };
                        Refusal::with_message(code, e.to_string())
                    })
            } else {
                ctx.txns
                    .verify(id, producer_id, epoch, topic, partition)
                    .await
                    .map_err(|e| {
                        let why = "partition is not part of the producer's open transaction";
                        Refusal::with_message(e.code(false), why)
                    })
            };
            if let Err(refusal) = verified {
                p.end_verification(producer_id, guard);
                return Err(refusal);
            }
            p.append_verified(&mut batches, now_ms(), producer_id, guard)
        }
        None => p.append_deferring_sync(&mut batches, now_ms()),
    };
    match appended {
        Ok((done, sync)) => Ok((p, done, sync)),
        Err(e) => {
            tracing::debug!(topic, partition, error = %e, "produce refused");
            Err(Refusal::from_partition_error(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_storage::{RecordError, RecordRefusal};

    fn keyless_refusal() -> Refusal {
        let e = PartitionError::Storage(StorageError::InvalidRecord(RecordRefusal {
            message: "2 of 4 records have no key".into(),
            record_errors: vec![
                RecordError {
                    batch_index: 1,
                    message: "no key".into(),
                },
                RecordError {
                    batch_index: 3,
                    message: "no key".into(),
                },
            ],
        }));
        Refusal::from_partition_error(&e)
    }

    #[test]
    fn refused_records_are_named_from_v8_on() {
        let answer = keyless_refusal().response(4, true);
        assert_eq!(answer.error_code, ResponseError::InvalidRecord.code());
        assert_eq!((answer.index, answer.base_offset), (4, -1));
        let named: Vec<i32> = answer.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(named, vec![1, 3]);
        assert!(answer.record_errors[0].batch_index_error_message.is_some());
        let message = answer
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert!(message.contains("no key"), "{message}");

        let old = keyless_refusal().response(4, false);
        assert_eq!(old.error_code, ResponseError::InvalidRecord.code());
        assert!(old.record_errors.is_empty() && old.error_message.is_none());
    }
}
