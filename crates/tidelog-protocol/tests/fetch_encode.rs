//! The zero-copy Fetch encoder must produce exactly kafka-protocol's bytes: for every
//! version and random contents, the chunks (externals filled in from their sources) equal
//! `FetchResponse` encoded with header and size prefix.

#![allow(clippy::unwrap_used)] // strategies build fixed shapes

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData, SnapshotId,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;
use tidelog_protocol::fetch_encode::{FETCH_MAX_VERSION, FETCH_MIN_VERSION};
use tidelog_protocol::{
    encode_fetch_response, encode_response, Chunk, FetchPartitionParts, FetchResponseParts,
    FetchTopicParts, RecordsPayload,
};
use uuid::Uuid;

#[derive(Debug, Clone)]
enum Payload {
    Null,
    Memory(Vec<u8>),
    External(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Partition {
    fixed: (i32, i16, i64, i64, i64, i32),
    aborted: Option<Vec<(i64, i64)>>,
    diverging: Option<(i32, i64)>,
    leader: Option<(i32, i32)>,
    snapshot: Option<(i64, i32)>,
    payload: Payload,
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        Just(Payload::Null),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Payload::Memory),
        proptest::collection::vec(any::<u8>(), 1000..1600).prop_map(Payload::Memory),
        proptest::collection::vec(any::<u8>(), 0..3000).prop_map(Payload::External),
    ]
}

fn partition() -> impl Strategy<Value = Partition> {
    (
        (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            prop_oneof![Just(-1), any::<i32>()],
        ),
        proptest::option::weighted(0.8, proptest::collection::vec(any::<(i64, i64)>(), 0..3)),
        proptest::option::of(any::<(i32, i64)>()),
        proptest::option::of(any::<(i32, i32)>()),
        proptest::option::of(any::<(i64, i32)>()),
        payload(),
    )
        .prop_map(
            |(fixed, aborted, diverging, leader, snapshot, payload)| Partition {
                fixed,
                aborted,
                diverging,
                leader,
                snapshot,
                payload,
            },
        )
}

type Topic = (String, [u8; 16], Vec<Partition>);
type Endpoint = (i32, String, i32, Option<String>);

#[derive(Debug, Clone)]
struct Response {
    top: (i32, i16, i32),
    topics: Vec<Topic>,
    endpoints: Vec<Endpoint>,
}

fn response() -> impl Strategy<Value = Response> {
    (
        (
            any::<i32>(),
            any::<i16>(),
            prop_oneof![Just(0), any::<i32>()],
        ),
        proptest::collection::vec(
            (
                "[a-z._-]{0,12}",
                any::<[u8; 16]>(),
                proptest::collection::vec(partition(), 0..4),
            ),
            0..3,
        ),
        proptest::collection::vec(
            (
                any::<i32>(),
                "[a-z.]{1,10}",
                any::<i32>(),
                proptest::option::of("[a-z]{0,4}"),
            ),
            0..3,
        ),
    )
        .prop_map(|(top, topics, endpoints)| Response {
            top,
            topics,
            endpoints,
        })
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn aborted(list: &Option<Vec<(i64, i64)>>) -> Option<Vec<AbortedTransaction>> {
    list.as_ref().map(|l| {
        l.iter()
            .map(|&(pid, first)| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(pid))
                    .with_first_offset(first)
            })
            .collect()
    })
}

fn diverging(d: Option<(i32, i64)>) -> EpochEndOffset {
    d.map_or_else(EpochEndOffset::default, |(e, o)| {
        EpochEndOffset::default().with_epoch(e).with_end_offset(o)
    })
}

fn leader(l: Option<(i32, i32)>) -> LeaderIdAndEpoch {
    l.map_or_else(LeaderIdAndEpoch::default, |(id, e)| {
        LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(id))
            .with_leader_epoch(e)
    })
}

fn snapshot(s: Option<(i64, i32)>) -> SnapshotId {
    s.map_or_else(SnapshotId::default, |(o, e)| {
        SnapshotId::default().with_end_offset(o).with_epoch(e)
    })
}

fn endpoints(list: &[Endpoint]) -> Vec<NodeEndpoint> {
    list.iter()
        .map(|(id, host, port, rack)| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(*id))
                .with_host(str_bytes(host))
                .with_port(*port)
                .with_rack(rack.as_deref().map(str_bytes))
        })
        .collect()
}

/// The same data as our parts (plus the external sources) and as kafka-protocol's struct.
fn build(r: &Response) -> (FetchResponseParts, Vec<Bytes>, FetchResponse) {
    let mut sources = Vec::new();
    let mut parts = FetchResponseParts {
        throttle_time_ms: r.top.0,
        error_code: r.top.1,
        session_id: r.top.2,
        topics: Vec::new(),
        node_endpoints: endpoints(&r.endpoints),
    };
    let mut reference = FetchResponse::default()
        .with_throttle_time_ms(r.top.0)
        .with_error_code(r.top.1)
        .with_session_id(r.top.2)
        .with_node_endpoints(endpoints(&r.endpoints));
    for (name, id, partitions) in &r.topics {
        let mut topic = FetchTopicParts {
            name: TopicName(str_bytes(name)),
            topic_id: Uuid::from_bytes(*id),
            partitions: Vec::new(),
        };
        let mut ref_topic = FetchableTopicResponse::default()
            .with_topic(TopicName(str_bytes(name)))
            .with_topic_id(Uuid::from_bytes(*id));
        for p in partitions {
            let (index, error, hw, lso, lss, preferred) = p.fixed;
            let (records, ref_records) = match &p.payload {
                Payload::Null => (RecordsPayload::None, None),
                Payload::Memory(b) => (
                    RecordsPayload::Bytes(Bytes::from(b.clone())),
                    Some(Bytes::from(b.clone())),
                ),
                Payload::External(b) => {
                    sources.push(Bytes::from(b.clone()));
                    (
                        RecordsPayload::External {
                            id: sources.len() - 1,
                            len: b.len() as u64,
                        },
                        Some(Bytes::from(b.clone())),
                    )
                }
            };
            topic.partitions.push(FetchPartitionParts {
                partition_index: index,
                error_code: error,
                high_watermark: hw,
                last_stable_offset: lso,
                log_start_offset: lss,
                aborted_transactions: aborted(&p.aborted),
                preferred_read_replica: preferred,
                diverging_epoch: diverging(p.diverging),
                current_leader: leader(p.leader),
                snapshot_id: snapshot(p.snapshot),
                records,
            });
            ref_topic.partitions.push(
                PartitionData::default()
                    .with_partition_index(index)
                    .with_error_code(error)
                    .with_high_watermark(hw)
                    .with_last_stable_offset(lso)
                    .with_log_start_offset(lss)
                    .with_aborted_transactions(aborted(&p.aborted))
                    .with_preferred_read_replica(BrokerId(preferred))
                    .with_diverging_epoch(diverging(p.diverging))
                    .with_current_leader(leader(p.leader))
                    .with_snapshot_id(snapshot(p.snapshot))
                    .with_records(ref_records),
            );
        }
        parts.topics.push(topic);
        reference.responses.push(ref_topic);
    }
    (parts, sources, reference)
}

/// Concatenates chunks, filling each external from its source (whose length must match).
fn flatten(chunks: &[Chunk], sources: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        match c {
            Chunk::Bytes(b) => out.extend_from_slice(b),
            Chunk::External { id, len } => {
                assert_eq!(sources[*id].len() as u64, *len);
                out.extend_from_slice(&sources[*id]);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn matches_kafka_protocol_for_every_version(r in response(), corr in any::<i32>()) {
        let (parts, sources, reference) = build(&r);
        for version in FETCH_MIN_VERSION..=FETCH_MAX_VERSION {
            let ours = encode_fetch_response(corr, version, &parts);
            let theirs = encode_response(corr, ApiKey::Fetch, version, &reference);
            match (ours, theirs) {
                (Ok(chunks), Ok(expected)) => {
                    prop_assert_eq!(flatten(&chunks, &sources), expected.to_vec(), "v{}", version);
                    // record bytes of externals were not copied into memory chunks
                    let in_memory: usize = chunks.iter().map(|c| match c {
                        Chunk::Bytes(b) => b.len(),
                        Chunk::External { .. } => 0,
                    }).sum();
                    let external: usize = sources.iter().map(Bytes::len).sum();
                    prop_assert_eq!(in_memory + external, expected.len());
                }
                (Err(_), Err(_)) => {}
                (ours, theirs) => prop_assert!(false, "v{}: ours {:?}, theirs {:?}", version, ours.is_ok(), theirs.is_ok()),
            }
        }
    }
}

#[test]
fn externals_stand_where_their_records_go() {
    let partition = |index, id| FetchPartitionParts {
        partition_index: index,
        high_watermark: 10,
        records: RecordsPayload::External { id, len: 5000 },
        ..FetchPartitionParts::default()
    };
    let parts = FetchResponseParts {
        topics: vec![FetchTopicParts {
            name: TopicName(StrBytes::from_static_str("t")),
            partitions: vec![partition(0, 0), partition(1, 1)],
            ..FetchTopicParts::default()
        }],
        ..FetchResponseParts::default()
    };
    // v11: nothing follows the last records, so the response ends with an external.
    let chunks = encode_fetch_response(9, 11, &parts).unwrap();
    assert_eq!(chunks.len(), 4);
    assert!(matches!(chunks[1], Chunk::External { id: 0, len: 5000 }));
    assert!(matches!(chunks[3], Chunk::External { id: 1, len: 5000 }));
    let (Chunk::Bytes(first), Chunk::Bytes(middle)) = (&chunks[0], &chunks[2]) else {
        panic!("memory chunks expected around the externals: {chunks:?}");
    };
    let size = i32::from_be_bytes([first[0], first[1], first[2], first[3]]) as usize;
    assert_eq!(size, first.len() - 4 + middle.len() + 10_000);
    // Between the two: the second partition's fixed fields, ending in its records length.
    // index, error, hw, lso, log start, aborted count, preferred replica, records length
    assert_eq!(middle.len(), 4 + 2 + 8 + 8 + 8 + 4 + 4 + 4);
    assert_eq!(&middle[middle.len() - 4..], &5000i32.to_be_bytes());

    // v12: partition tagged fields (none: one 0 byte) and topic/response tagged fields follow.
    let chunks = encode_fetch_response(9, 12, &parts).unwrap();
    assert_eq!(chunks.len(), 5);
    assert_eq!(chunks[4], Chunk::Bytes(Bytes::from_static(&[0, 0, 0])));
}

#[test]
fn unsupported_versions_are_refused() {
    let parts = FetchResponseParts::default();
    assert!(encode_fetch_response(1, 3, &parts).is_err());
    assert!(encode_fetch_response(1, FETCH_MAX_VERSION + 1, &parts).is_err());
}
