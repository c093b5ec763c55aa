//! ListOffsets: earliest, latest (high watermark, or last stable offset under
//! read_committed), max timestamp, and the first offset at or after a timestamp.
//! Answered by the partition's leader only (NOT_LEADER_OR_FOLLOWER elsewhere), after
//! the current-leader-epoch checks (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
//!
//! The special timestamps exist from the version that introduced them (Kafka's
//! `timestampMinSupportedVersion`); asked for earlier, or an unknown negative one, the
//! partition answers UNSUPPORTED_VERSION, as Kafka does. Without tiered storage the
//! local log is the whole log: EARLIEST_LOCAL (v8) is the log start, and LATEST_TIERED
//! (v9, KIP-1005) and EARLIEST_PENDING_UPLOAD (v11, KIP-1023) answer offset -1 with
//! leader epoch -1, Kafka's answer for a topic without remote storage. v10's
//! `timeout_ms` bounds remote-storage reads, of which there are none.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::per_partition::{answer_each, led_partition};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::replica::PartitionError;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 11 };

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
/// Without tiered storage the earliest local offset is the earliest offset.
const EARLIEST_LOCAL: i64 = -4;
/// The highest offset in remote storage (KIP-1005): none here.
const LATEST_TIERED: i64 = -5;
/// The first offset not yet uploaded to remote storage (KIP-1023): none here.
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// The first ListOffsets version that knows a special timestamp; `None` for a
/// negative timestamp Kafka does not define.
fn first_version_of(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        EARLIEST_PENDING_UPLOAD => Some(11),
        _ => None,
    }
}

/// Whether `timestamp` may be asked for at `version` (any timestamp >= 0 may).
fn timestamp_supported(timestamp: i64, version: i16) -> bool {
    timestamp >= 0 || first_version_of(timestamp).is_some_and(|first| version >= first)
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListOffsetsRequest = req.decode()?;
    let read_committed = request.isolation_level == 1;
    // The leader epoch is on the wire from v4.
    let version = req.version();
    let with_epoch = version >= 4;
    // DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = req.access(ctx);
    let topics = answer_each(
        request.topics,
        |topic| &topic.partitions,
        |topic, p| {
            let base =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            let current_epoch = if with_epoch {
                p.current_leader_epoch
            } else {
                -1
            };
            let looked_up = if !access.topic(AclOperation::Describe, &topic.name.0) {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else if timestamp_supported(p.timestamp, version) {
                lookup(
                    ctx,
                    &topic.name.0,
                    p.partition_index,
                    (p.timestamp, current_epoch),
                    read_committed,
                )
            } else {
                Err(ResponseError::UnsupportedVersion.code())
            };
            match looked_up {
                Ok((offset, timestamp, epoch)) => base
                    .with_offset(offset)
                    .with_timestamp(timestamp)
                    .with_leader_epoch(if with_epoch { epoch } else { -1 }),
                Err(code) => base
                    .with_error_code(code)
                    .with_offset(-1)
                    .with_timestamp(-1),
            }
        },
        |topic, partitions| {
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        },
    );
    req.respond(&ListOffsetsResponse::default().with_topics(topics))
}

/// (offset, timestamp, leader epoch) or a Kafka error code.
fn lookup(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    (timestamp, current_leader_epoch): (i64, i32),
    read_committed: bool,
) -> Result<(i64, i64, i32), i16> {
    let p = led_partition(ctx, topic, partition, current_leader_epoch)?;
    let epoch = p.leader_epoch();
    let error = |e: PartitionError| e.code();
    let offsets = p.offsets().map_err(error)?;
    match timestamp {
        LATEST => Ok((
            if read_committed {
                offsets.last_stable
            } else {
                offsets.high_watermark
            },
            -1,
            epoch,
        )),
        EARLIEST | EARLIEST_LOCAL => Ok((offsets.log_start, -1, epoch)),
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok((-1, -1, -1)),
        MAX_TIMESTAMP => match p
            .with_log(|log| log.max_timestamp_and_offset())
            .map_err(error)?
        {
            Some((offset, ts)) => Ok((offset, ts, epoch)),
            None => Ok((-1, -1, epoch)),
        },
        ts if ts >= 0 => match p
            .with_log(|log| log.offset_for_timestamp(ts))
            .map_err(error)?
        {
            Some((offset, found)) if offset < offsets.high_watermark => Ok((offset, found, epoch)),
            _ => Ok((-1, -1, epoch)),
        },
        _ => Err(ResponseError::UnsupportedVersion.code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_timestamps_exist_from_their_version() {
        assert!(timestamp_supported(1_700_000_000_000, 1));
        assert!(timestamp_supported(LATEST, 1) && timestamp_supported(EARLIEST, 1));
        assert!(!timestamp_supported(MAX_TIMESTAMP, 6) && timestamp_supported(MAX_TIMESTAMP, 7));
        assert!(!timestamp_supported(EARLIEST_LOCAL, 7) && timestamp_supported(EARLIEST_LOCAL, 8));
        assert!(!timestamp_supported(LATEST_TIERED, 8) && timestamp_supported(LATEST_TIERED, 9));
        assert!(!timestamp_supported(EARLIEST_PENDING_UPLOAD, 10));
        assert!(timestamp_supported(EARLIEST_PENDING_UPLOAD, 11));
        assert!(!timestamp_supported(-7, 11));
    }
}
