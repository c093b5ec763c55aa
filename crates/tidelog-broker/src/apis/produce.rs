//! Produce: validate and append each partition's batches, answer with base offsets.
//!
//! The append happens while the connection's reader is still on this request, so the
//! batches of one connection land in the order they were sent.

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::{now_ms, Ctx};
use crate::metrics::StorageOperation;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 3, max: 11 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ProduceRequest = req.decode()?;
    let acks = request.acks;
    let txn_id = request.transactional_id.as_ref().map(|t| t.0.to_string());
    // Error messages exist on the wire from v8.
    let with_messages = req.version() >= 8;
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let result = if !(-1..=1).contains(&acks) {
                Err((ResponseError::InvalidRequiredAcks.code(), None))
            } else {
                append(
                    ctx,
                    &name,
                    data.index,
                    data.records.as_deref(),
                    txn_id.as_deref(),
                )
            };
            if let Err((code, _)) = &result {
                ctx.metrics.requests.error_code(ApiKey::Produce, *code);
                if *code == ResponseError::KafkaStorageError.code() {
                    ctx.metrics.storage.failed(StorageOperation::Append);
                }
            }
            partitions.push(match result {
                Ok((base_offset, log_append_time_ms, log_start_offset)) => {
                    PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_base_offset(base_offset)
                        .with_log_append_time_ms(log_append_time_ms)
                        .with_log_start_offset(log_start_offset)
                }
                Err((code, message)) => PartitionProduceResponse::default()
                    .with_index(data.index)
                    .with_error_code(code)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(-1)
                    .with_error_message(
                        message.filter(|_| with_messages).map(StrBytes::from_string),
                    ),
            });
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partition_responses(partitions),
        );
    }
    if acks == 0 {
        return Ok(Reply::Nothing);
    }
    req.respond(&ProduceResponse::default().with_responses(topics))
}

type AppendResult = Result<(i64, i64, i64), (i16, Option<String>)>;

fn append(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    records: Option<&[u8]>,
    transactional_id: Option<&str>,
) -> AppendResult {
    let Some(p) = ctx.replicas.get(topic, partition) else {
        return Err((ResponseError::UnknownTopicOrPartition.code(), None));
    };
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err((
            ResponseError::InvalidRecord.code(),
            Some("no records".to_string()),
        ));
    };
    ctx.metrics.topics.produced_batches(topic, records);
    let mut batches = BytesMut::from(records);
    // Transactional batches only into a partition of the producer's open transaction
    // (checked with the coordinator, which cannot decide the transaction meanwhile).
    let transactional = tidelog_storage::BatchHeader::new(&batches)
        .ok()
        .filter(|h| h.is_transactional())
        .map(|h| (h.producer_id(), h.producer_epoch()));
    let appended = match transactional {
        Some((producer_id, epoch)) => ctx
            .txns
            .with_verified_produce(
                ctx,
                transactional_id.unwrap_or(""),
                producer_id,
                epoch,
                topic,
                partition,
                || p.append(&mut batches, now_ms()),
            )
            .map_err(|code| {
                let why = "partition is not part of the producer's open transaction";
                (code, Some(why.to_string()))
            })?,
        None => p.append(&mut batches, now_ms()),
    };
    match appended {
        Ok(done) => Ok((
            done.base_offset,
            done.log_append_time_ms,
            done.log_start_offset,
        )),
        Err(e) => {
            tracing::debug!(topic, partition, error = %e, "produce refused");
            Err((e.code(), Some(e.to_string())))
        }
    }
}
