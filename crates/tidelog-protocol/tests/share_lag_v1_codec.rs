//! The vendored codec's WriteShareGroupState, ReadShareGroupStateSummary and
//! DescribeShareGroupOffsets v1 (KIP-1226, a tidelog patch, see
//! vendor/kafka-protocol/PATCHES.md): the new fields sit where Kafka 4.2's schemas put
//! them, round-trip, read as -1 from a v0 message, and a count a coordinator would
//! lose cannot be sent at v0.

#![allow(clippy::unwrap_used)] // fixed inputs

use bytes::BytesMut;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition, DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadShareGroupStateSummaryResponse, ReadStateSummaryResult,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData, WriteShareGroupStateRequest, WriteStateData,
};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

fn encode<T: Encodable>(message: &T, version: i16) -> Result<BytesMut, String> {
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, version)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

#[test]
fn write_share_group_state_v1_carries_the_delivery_complete_count_after_the_start_offset() {
    let partition = PartitionData::default()
        .with_partition(3)
        .with_start_offset(100)
        .with_delivery_complete_count(7);
    let request = WriteShareGroupStateRequest::default()
        .with_group_id(StrBytes::from_static_str("g"))
        .with_topics(vec![WriteStateData::default()
            .with_topic_id(Uuid::from_u128(1))
            .with_partitions(vec![partition.clone()])]);
    let v1 = encode(&request, 1).unwrap();
    // group "g", one topic: its id, one partition: partition, state epoch, leader
    // epoch (int32s), start offset (int64), then the count.
    let count_at = 2 + 1 + 16 + 1 + 4 + 4 + 4 + 8;
    assert_eq!(&v1[count_at - 8..count_at], &100i64.to_be_bytes());
    assert_eq!(&v1[count_at..count_at + 4], &7i32.to_be_bytes());
    assert_eq!(
        WriteShareGroupStateRequest::decode(&mut v1.freeze(), 1).unwrap(),
        request
    );
    // A v0 writer has no count: it is not sent, and reads back as Kafka's -1.
    assert!(encode(&request, 0).is_err(), "v0 has no count");
    let unknown = WriteShareGroupStateRequest::default()
        .with_topics(vec![WriteStateData::default()
            .with_partitions(vec![partition.with_delivery_complete_count(-1)])]);
    let v0 = encode(&unknown, 0).unwrap();
    assert_eq!(v0.len() + 4, encode(&unknown, 1).unwrap().len());
    let decoded = WriteShareGroupStateRequest::decode(&mut v0.freeze(), 0).unwrap();
    assert_eq!(decoded.topics[0].partitions[0].delivery_complete_count, -1);
    assert!(encode(&unknown, 2).is_err());
}

#[test]
fn read_share_group_state_summary_v1_answers_the_delivery_complete_count_last() {
    let response = ReadShareGroupStateSummaryResponse::default().with_results(vec![
        ReadStateSummaryResult::default()
            .with_topic_id(Uuid::from_u128(1))
            .with_partitions(vec![PartitionResult::default()
                .with_partition(3)
                .with_start_offset(100)
                .with_delivery_complete_count(7)]),
    ]);
    let v1 = encode(&response, 1).unwrap();
    // one result: topic id, one partition: partition, error code, error message
    // (null), state epoch, leader epoch, start offset, then the count.
    let count_at = 1 + 16 + 1 + 4 + 2 + 1 + 4 + 4 + 8;
    assert_eq!(&v1[count_at..count_at + 4], &7i32.to_be_bytes());
    assert_eq!(
        ReadShareGroupStateSummaryResponse::decode(&mut v1.freeze(), 1).unwrap(),
        response
    );
    // A v0 answer leaves it out, and it reads as unknown.
    let v0 = encode(&response, 0).unwrap();
    assert_eq!(v0.len() + 4, encode(&response, 1).unwrap().len());
    let decoded = ReadShareGroupStateSummaryResponse::decode(&mut v0.freeze(), 0).unwrap();
    assert_eq!(decoded.results[0].partitions[0].delivery_complete_count, -1);
}

#[test]
fn describe_share_group_offsets_v1_answers_the_lag_after_the_leader_epoch() {
    let response = DescribeShareGroupOffsetsResponse::default().with_groups(vec![
        DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                .with_topic_id(Uuid::from_u128(1))
                .with_partitions(vec![
                    DescribeShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(0)
                        .with_start_offset(100)
                        .with_leader_epoch(5)
                        .with_lag(42),
                ])]),
    ]);
    let v1 = encode(&response, 1).unwrap();
    // throttle, one group "g", one topic "t", its id, one partition: index, start
    // offset, leader epoch, then the lag.
    let lag_at = 4 + 1 + 2 + 1 + 2 + 16 + 1 + 4 + 8 + 4;
    assert_eq!(&v1[lag_at - 4..lag_at], &5i32.to_be_bytes());
    assert_eq!(&v1[lag_at..lag_at + 8], &42i64.to_be_bytes());
    assert_eq!(
        DescribeShareGroupOffsetsResponse::decode(&mut v1.freeze(), 1).unwrap(),
        response
    );
    // A v0 client is answered without it; a v0 answer reads as unknown (-1).
    let v0 = encode(&response, 0).unwrap();
    assert_eq!(v0.len() + 8, encode(&response, 1).unwrap().len());
    let decoded = DescribeShareGroupOffsetsResponse::decode(&mut v0.freeze(), 0).unwrap();
    assert_eq!(decoded.groups[0].topics[0].partitions[0].lag, -1);
    assert!(encode(&response, 2).is_err());
}
