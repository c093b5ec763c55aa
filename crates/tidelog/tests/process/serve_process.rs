//! Process tests of `tidelog serve`: real binary, real sockets, real disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::{Conn, Node};

fn records(first: usize, count: usize) -> Vec<Record> {
    (first..first + count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: (i - first) as i64,
            sequence: -1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(format!("value-{i}-{}", "x".repeat(i % 50)))),
            headers: [(
                StrBytes::from_static_str("h"),
                Some(Bytes::from(format!("{i}"))),
            )]
            .into_iter()
            .collect(),
        })
        .collect()
}

fn batch(first: usize, count: usize, compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records(first, count),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn create_topic(conn: &mut Conn, name: &str, partitions: i32) {
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

async fn produce(conn: &mut Conn, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let resp: ProduceResponse = conn.call(ApiKey::Produce, 9, &req).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(16 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(8 << 20)])])
}

/// All records from `offset` up to the high watermark.
async fn fetch_all(conn: &mut Conn, topic: &str, partition: i32, mut offset: i64) -> Vec<Record> {
    let mut out = Vec::new();
    loop {
        let resp: FetchResponse = conn
            .call(
                ApiKey::Fetch,
                11,
                &fetch_request(topic, partition, offset, 0),
            )
            .await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return out;
        }
        while !bytes.is_empty() {
            let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
            out.extend(set.records.into_iter().filter(|r| r.offset >= offset));
        }
        offset = out.last().map_or(offset, |r| r.offset + 1);
        if offset >= p.high_watermark {
            return out;
        }
    }
}

fn assert_round_trip(got: &[Record], first: usize) {
    let want = records(first, got.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.offset, i as i64, "dense offsets");
        assert_eq!(g.key, w.key);
        assert_eq!(g.value, w.value);
        assert_eq!(g.timestamp, w.timestamp);
        assert_eq!(g.headers, w.headers);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_fetch_restart_and_long_poll() {
    let mut node = Node::start(&[]);
    let mut conn = Conn::connect(node.kafka).await;
    let versions: ApiVersionsResponse = conn
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    assert_eq!(versions.error_code, 0);
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));

    create_topic(&mut conn, "orders", 3).await;
    let mut next = 0;
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let (error, base) = produce(&mut conn, "orders", 1, batch(next, 100, compression)).await;
        assert_eq!((error, base), (0, next as i64));
        next += 100;
    }
    assert_round_trip(&fetch_all(&mut conn, "orders", 1, 0).await, 0);

    // Long poll: parked at the end, answered as soon as a record arrives.
    let kafka = node.kafka;
    let waiter = tokio::spawn(async move {
        let mut c = Conn::connect(kafka).await;
        let started = Instant::now();
        let resp: FetchResponse = c
            .call(
                ApiKey::Fetch,
                11,
                &fetch_request("orders", 1, next as i64, 10_000),
            )
            .await;
        (started.elapsed(), resp)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce(&mut conn, "orders", 1, batch(next, 1, Compression::None)).await;
    let (waited, resp) = waiter.await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "long poll answered after {waited:?}"
    );
    assert!(!resp.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default()
        .is_empty());
    next += 1;

    // kill -9, restart: everything acknowledged is there, offsets continue.
    node.kill9();
    node.restart();
    let mut conn = Conn::connect(node.kafka).await;
    let got = fetch_all(&mut conn, "orders", 1, 0).await;
    assert_eq!(got.len(), next);
    assert_round_trip(&got, 0);
    let (error, base) = produce(&mut conn, "orders", 1, batch(next, 10, Compression::None)).await;
    assert_eq!((error, base), (0, next as i64));

    assert!(node.stop(), "clean shutdown exits 0");
    node.restart();
    let mut conn = Conn::connect(node.kafka).await;
    assert_eq!(fetch_all(&mut conn, "orders", 1, 0).await.len(), next + 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_close_only_their_connection() {
    let mut node = Node::start(&[]);
    let hostile: Vec<Vec<u8>> = vec![
        // Metadata v1 whose topic count is i32::MAX.
        {
            let mut body = vec![0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff];
            body.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
            let mut framed = (body.len() as i32).to_be_bytes().to_vec();
            framed.extend(body);
            framed
        },
        (-1i32).to_be_bytes().to_vec(),
        (i32::MAX).to_be_bytes().to_vec(),
        vec![0, 0, 0, 3, 0, 3, 0],
        vec![0, 0, 0, 8, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1],
    ];
    for bytes in hostile {
        let mut conn = Conn::connect(node.kafka).await;
        conn.send_raw(&bytes).await;
        // Either an answer or a close; never a hang.
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_raw()).await;
        let mut good = Conn::connect(node.kafka).await;
        let v: ApiVersionsResponse = good
            .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
            .await;
        assert_eq!(v.error_code, 0);
    }
    assert!(node.is_running());
}

/// A partition that answers with an error still carries an empty (not null) record set:
/// librdkafka rejects a whole flexible Fetch response with a null one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_errors_carry_empty_records() {
    let node = Node::start(&[]);
    let mut conn = Conn::connect(node.kafka).await;
    create_topic(&mut conn, "errs", 1).await;
    produce(&mut conn, "errs", 0, batch(0, 10, Compression::None)).await;
    for version in [11, 12] {
        let resp: FetchResponse = conn
            .call(ApiKey::Fetch, version, &fetch_request("errs", 0, 99, 0))
            .await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 1, "OFFSET_OUT_OF_RANGE at v{version}");
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0), "v{version}");
    }
    let meta: kafka_protocol::messages::MetadataResponse = conn
        .call(
            ApiKey::Metadata,
            12,
            &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
        )
        .await;
    let topic_id = meta.topics[0].topic_id;
    let mut req = fetch_request("errs", 0, 99, 0);
    req.topics[0].topic_id = topic_id;
    let resp: FetchResponse = conn.call(ApiKey::Fetch, 16, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 1, "OFFSET_OUT_OF_RANGE at v16");
    assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0), "v16");
}
