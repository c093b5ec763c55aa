//! DeleteRecords: moves a partition's log start offset forward, on the leader (followers
//! follow the log start offset it reports in fetch answers).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::per_partition::{answer_each, led_partition};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteRecordsRequest = req.decode()?;
    let topics = answer_each(
        request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            match delete_before(ctx, &topic.name.0, p.partition_index, p.offset) {
                Ok(low) => result.with_low_watermark(low),
                Err(code) => result.with_low_watermark(-1).with_error_code(code),
            }
        },
        |topic, partitions| {
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        },
    );
    req.respond(&DeleteRecordsResponse::default().with_topics(topics))
}

/// The new low watermark, or a Kafka error code. Offset -1 means "up to the high watermark".
fn delete_before(ctx: &Ctx, topic: &str, partition: i32, offset: i64) -> Result<i64, i16> {
    // Only the leader moves the log start; followers take it from its fetch answers.
    let p = led_partition(ctx, topic, partition, -1)?;
    let result = p.with_log(|log| {
        let hw = log.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Ok(Err(ResponseError::OffsetOutOfRange.code()));
        }
        Ok(Ok(log.delete_records_before(target)?))
    });
    match result {
        Ok(inner) => inner,
        Err(e) => Err(e.code()),
    }
}
