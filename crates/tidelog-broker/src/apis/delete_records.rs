//! DeleteRecords: moves a partition's log start offset forward on the leader, and
//! answers once every in-sync replica has moved its own (the low watermark reached the
//! offset), as Kafka does: whichever of them leads next must not serve the deleted
//! records again. Followers take the new log start from the leader's fetch answers and
//! report theirs in their next fetch.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsRequest, DeleteRecordsTopic};
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::per_partition::{answer_each, led_partition};
use super::{later_response, Request};
use crate::context::Ctx;
use crate::net::Reply;
use crate::replica::Partition;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// A partition whose answer waits for its followers: its name, the partition, and the
/// offset its low watermark must reach.
struct Waiting {
    topic: String,
    partition_index: i32,
    partition: Arc<Partition>,
    offset: i64,
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteRecordsRequest = req.decode()?;
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    // Deleting segment files and writing the log-start checkpoint (an fsync each) is
    // blocking work: it runs off the async workers.
    let worker = Arc::clone(ctx);
    let asked = request.topics.clone();
    // DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED and nothing deleted.
    let access = req.access(ctx);
    let refused: HashSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|name| !access.topic(AclOperation::Delete, name))
        .collect();
    let deleted =
        tokio::task::spawn_blocking(move || delete_all(&worker, request.topics, &refused)).await;
    let (mut topics, waiting) = match deleted {
        Ok(done) => done,
        Err(e) => {
            tracing::error!(error = %e, "DeleteRecords panicked");
            (
                answer_all(asked, ResponseError::UnknownServerError.code()),
                Vec::new(),
            )
        }
    };
    if waiting.is_empty() {
        return req.respond(&DeleteRecordsResponse::default().with_topics(topics));
    }
    let (header, metrics) = (req.header, req.metrics);
    Ok(Reply::Later(Box::pin(async move {
        for w in waiting {
            let outcome = w.partition.wait_low_watermark(w.offset, timeout).await;
            let result = topics
                .iter_mut()
                .filter(|t| t.name.0.as_str() == w.topic)
                .flat_map(|t| t.partitions.iter_mut())
                .find(|r| r.partition_index == w.partition_index);
            match (result, outcome) {
                (Some(result), Ok(low)) => result.low_watermark = low,
                (Some(result), Err(e)) => result.error_code = e.code(),
                (None, _) => {}
            }
        }
        later_response(
            &metrics,
            &header,
            &DeleteRecordsResponse::default().with_topics(topics),
        )
    })))
}

fn topic_result(
    topic: DeleteRecordsTopic,
    partitions: Vec<DeleteRecordsPartitionResult>,
) -> DeleteRecordsTopicResult {
    DeleteRecordsTopicResult::default()
        .with_name(topic.name)
        .with_partitions(partitions)
}

/// The same error for every partition asked for.
fn answer_all(request: Vec<DeleteRecordsTopic>, code: i16) -> Vec<DeleteRecordsTopicResult> {
    answer_each(
        request,
        |topic| &topic.partitions,
        |_, p| {
            DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1)
                .with_error_code(code)
        },
        topic_result,
    )
}

/// Moves the log start of every partition asked for; the answers so far and the
/// partitions whose answer waits for their followers.
fn delete_all(
    ctx: &Ctx,
    request: Vec<DeleteRecordsTopic>,
    refused: &HashSet<String>,
) -> (Vec<DeleteRecordsTopicResult>, Vec<Waiting>) {
    let mut waiting = Vec::new();
    let topics = answer_each(
        request,
        |topic| &topic.partitions,
        |topic, p| {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            let outcome = if refused.contains(topic.name.0.as_str()) {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else {
                delete_before(ctx, &topic.name.0, p.partition_index, p.offset)
            };
            match outcome {
                Ok((partition, offset)) => {
                    let low = partition.hw_watch().borrow().low_watermark;
                    if low < offset {
                        waiting.push(Waiting {
                            topic: topic.name.0.to_string(),
                            partition_index: p.partition_index,
                            partition,
                            offset,
                        });
                    }
                    result.with_low_watermark(low)
                }
                Err(code) => result.with_low_watermark(-1).with_error_code(code),
            }
        },
        topic_result,
    );
    (topics, waiting)
}

/// Moves the leader's log start; returns the partition and the offset the low watermark
/// must reach, or a Kafka error code. Offset -1 means "up to the high watermark".
fn delete_before(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Arc<Partition>, i64), i16> {
    if tidelog_controller::INTERNAL_TOPICS.contains(&topic) {
        // The coordinators' state must not lose its oldest records (Kafka's answer too).
        return Err(ResponseError::InvalidTopicException.code());
    }
    // Only the leader moves the log start; followers take it from its fetch answers.
    let p = led_partition(ctx, topic, partition, -1)?;
    let result = p.with_log(|log| {
        let hw = log.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Ok(Err(ResponseError::OffsetOutOfRange.code()));
        }
        log.delete_records_before(target)?;
        Ok(Ok(target))
    });
    match result {
        Ok(Ok(target)) => {
            // On disk before the answer (outside the log lock): deleted records stay
            // deleted across a crash of this node.
            p.write_checkpoints().map_err(|e| {
                tracing::error!(topic, partition, error = %e, "writing the log start offset failed");
                ResponseError::KafkaStorageError.code()
            })?;
            p.log_start_moved();
            Ok((p, target))
        }
        Ok(Err(code)) => Err(code),
        Err(e) => Err(e.code()),
    }
}
