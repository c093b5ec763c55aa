//! The native `Producer` (tidelog-client) against a real `tidelog serve`: with the broker
//! gone, `send` returns at once while `buffer.memory` has room, then blocks for
//! `max.block.ms`, then fails with the buffer-full error (and the buffered records are
//! delivered once the broker is back); an idempotent producer's batches carry its
//! producer id and consecutive sequences, and a batch resent after a lost acknowledgement
//! is written once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::{Conn, Node};
use tidelog_client::{Client, ClientError, NewTopic, ProduceRecord, Producer, ProducerConfig};
use tidelog_storage::BatchHeader;

async fn client(node: &Node) -> Client {
    Client::connect_to(&node.kafka.to_string()).await.unwrap()
}

async fn create(node: &Node, topic: &str) {
    client(node)
        .await
        .create_topic(&NewTopic {
            name: topic.into(),
            partitions: 1,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
}

fn record(i: usize) -> ProduceRecord {
    ProduceRecord::new(None, Some(Bytes::from(format!("{i:0100}"))))
}

/// (base offset, record count, producer id, epoch, base sequence) of every batch of
/// partition 0, read with one raw Fetch.
async fn batches(node: &Node, topic: &str) -> Vec<(i64, i32, i64, i16, i32)> {
    let mut conn = Conn::connect(node.kafka).await;
    let req = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(16 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(8 << 20)])]);
    let resp: FetchResponse = conn.call(ApiKey::Fetch, 11, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::new(&bytes[pos..]).unwrap();
        out.push((
            h.base_offset(),
            h.record_count(),
            h.producer_id(),
            h.producer_epoch(),
            h.base_sequence(),
        ));
        pos += h.total_size().unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_returns_at_once_then_blocks_for_max_block_then_fails_when_the_broker_is_down() {
    let mut node = Node::start(&[]);
    create(&node, "blocked").await;
    let mut config = ProducerConfig::default();
    config
        .set("buffer.memory", "4096")
        .unwrap()
        .set("max.block.ms", "2000")
        .unwrap();
    let mut producer = Producer::new(client(&node).await, config);
    // Metadata and the producer id are known before the broker goes away.
    producer.send("blocked", None, record(0)).await.unwrap();
    producer.flush().await.unwrap();

    node.kill9();
    let mut queued = 0;
    let (waited, err) = loop {
        let started = Instant::now();
        match producer.send("blocked", None, record(queued + 1)).await {
            Ok(()) => {
                assert!(
                    started.elapsed() < Duration::from_millis(500),
                    "a send with room took {:?}",
                    started.elapsed()
                );
                queued += 1;
                assert!(queued < 1000, "buffer.memory=4096 never filled");
            }
            Err(e) => break (started.elapsed(), e),
        }
    };
    assert!(queued >= 10, "only {queued} records fitted in 4096 bytes");
    assert!(
        matches!(
            err,
            ClientError::BufferFull {
                buffer_memory: 4096,
                max_block_ms: 2000,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("buffer.memory") && text.contains("max.block.ms"),
        "{text}"
    );
    assert!(
        waited >= Duration::from_millis(2000),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "blocked for {waited:?}");
    assert_eq!(
        producer.buffered().0,
        queued,
        "the refused record was not queued"
    );

    // The buffered records were kept: once the broker is back they are written, once.
    node.restart();
    let written = producer.flush().await.unwrap();
    assert_eq!(written.len(), queued);
    let offsets: Vec<i64> = written.iter().map(|m| m.offset).collect();
    let expected: Vec<i64> = (1..=queued as i64).collect();
    assert_eq!(offsets, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_batches_carry_the_producer_id_and_consecutive_sequences_and_a_resend_is_written_once(
) {
    let node = Node::start(&[]);
    create(&node, "idem").await;
    let mut producer = Producer::new(client(&node).await, ProducerConfig::default());
    for round in 0..3 {
        for i in 0..5 {
            producer
                .send("idem", Some(0), record(round * 5 + i))
                .await
                .unwrap();
        }
        if round == 2 {
            // The broker writes this batch but its answer is lost: the producer sends
            // the same batch (same sequence) again.
            producer.lose_next_acknowledgements();
        }
        let written = producer.flush().await.unwrap();
        let offsets: Vec<i64> = written.iter().map(|m| m.offset).collect();
        let first = i64::try_from(round * 5).unwrap();
        assert_eq!(offsets, (first..first + 5).collect::<Vec<_>>());
    }
    let (producer_id, epoch) = producer.producer_id().unwrap();
    assert!(producer_id >= 0);
    assert_eq!(
        batches(&node, "idem").await,
        vec![
            (0, 5, producer_id, epoch, 0),
            (5, 5, producer_id, epoch, 5),
            (10, 5, producer_id, epoch, 10),
        ],
        "three batches, consecutive sequences, the resent one written once"
    );

    // The hook really resends: without idempotence the same lost answer writes twice.
    create(&node, "plain").await;
    let mut config = ProducerConfig::default();
    config.set("enable.idempotence", "false").unwrap();
    let mut plain = Producer::new(client(&node).await, config);
    for i in 0..5 {
        plain.send("plain", Some(0), record(i)).await.unwrap();
    }
    plain.lose_next_acknowledgements();
    plain.flush().await.unwrap();
    let written: Vec<(i64, i32, i64)> = batches(&node, "plain")
        .await
        .into_iter()
        .map(|(offset, count, id, _, _)| (offset, count, id))
        .collect();
    assert_eq!(written, vec![(0, 5, -1), (5, 5, -1)]);
}
