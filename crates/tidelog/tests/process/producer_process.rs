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
use support::native::{client, create_topic};
use support::{Conn, Node};
use tidelog_client::{ClientError, ProduceRecord, Producer, ProducerConfig};
use tidelog_storage::BatchHeader;

async fn create(node: &Node, topic: &str) {
    create_topic(node, topic, 1).await;
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

/// A producer with buffer.memory=4096 and max.block.ms=2000 that has already written to
/// `topic`, so its metadata and producer id are known before the broker goes away.
async fn small_buffer_producer(node: &Node, topic: &str) -> Producer {
    create(node, topic).await;
    let mut config = ProducerConfig::default();
    config
        .set("buffer.memory", "4096")
        .unwrap()
        .set("max.block.ms", "2000")
        .unwrap();
    let mut producer = Producer::new(client(node).await, config);
    producer.send(topic, None, record(0)).await.unwrap();
    producer.flush().await.unwrap();
    producer
}

/// With the broker unavailable: sends return at once until the buffer is full, then one
/// blocks for max.block.ms and fails with BufferFull. Returns how many were queued.
async fn fill_until_blocked(producer: &mut Producer, topic: &str) -> usize {
    let mut queued = 0;
    let (waited, err) = loop {
        let started = Instant::now();
        match producer.send(topic, None, record(queued + 1)).await {
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
    queued
}

/// Once the broker is back the kept records are written, once each, in order.
async fn delivered_once(node: &Node, producer: &mut Producer, topic: &str, queued: usize) {
    let written = producer.flush().await.unwrap();
    let offsets: Vec<i64> = written.iter().map(|m| m.offset).collect();
    let expected: Vec<i64> = (1..=i64::try_from(queued).unwrap()).collect();
    assert_eq!(offsets, expected);
    let in_log: i32 = batches(node, topic).await.iter().map(|b| b.1).sum();
    assert_eq!(
        in_log,
        i32::try_from(queued).unwrap() + 1,
        "nothing written twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_returns_at_once_then_blocks_for_max_block_then_fails_when_the_broker_is_down() {
    let mut node = Node::start(&[]);
    let mut producer = small_buffer_producer(&node, "blocked").await;
    node.kill9();
    let queued = fill_until_blocked(&mut producer, "blocked").await;
    node.restart();
    delivered_once(&node, &mut producer, "blocked", queued).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_blocks_for_max_block_then_fails_when_the_broker_is_stopped() {
    // SIGSTOP: connections open and requests are sent, but nothing is answered. The
    // request abandoned at max.block.ms is read once the broker resumes; the producer's
    // resend of the same batch is then a duplicate, and idempotence writes it once.
    let node = Node::start(&[]);
    let mut producer = small_buffer_producer(&node, "stopped").await;
    node.signal("STOP");
    let queued = fill_until_blocked(&mut producer, "stopped").await;
    node.signal("CONT");
    delivered_once(&node, &mut producer, "stopped", queued).await;
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
