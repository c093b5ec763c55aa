//! The `BackgroundProducer` against a real `tidelog serve`: a record sent and never
//! flushed arrives by itself after `linger.ms`; `batch.size` sends before a long linger;
//! `close` drains what is buffered. Each is read back with a consumer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::native::{client, create_topic};
use support::Node;
use tidelog_client::{
    BackgroundProducer, Consumer, ConsumerConfig, OffsetReset, ProduceRecord, ProducerConfig,
};

fn record(i: usize) -> ProduceRecord {
    ProduceRecord::new(None, Some(Bytes::from(format!("{i:0100}"))))
}

/// Reads partition 0 of `topic` until `count` records came, for at most `limit`;
/// returns how many came.
async fn read(node: &Node, topic: &str, count: usize, limit: Duration) -> usize {
    let mut c = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    c.fetch.max_wait = Duration::from_millis(50);
    let mut consumer = Consumer::new(client(node).await, c).unwrap();
    consumer.assign(&[(topic.to_string(), 0)]).unwrap();
    let started = Instant::now();
    let mut seen = 0;
    while seen < count && started.elapsed() < limit {
        seen += consumer
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .len();
    }
    seen
}

fn config(linger_ms: &str, batch_size: &str) -> ProducerConfig {
    let mut config = ProducerConfig::default();
    config
        .set("linger.ms", linger_ms)
        .unwrap()
        .set("batch.size", batch_size)
        .unwrap();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_never_flushed_arrives_after_linger() {
    let node = Node::start(&[]);
    create_topic(&node, "lingers", 1).await;
    let producer = BackgroundProducer::new(client(&node).await, config("200", "16384")).unwrap();
    let sent = Instant::now();
    producer.send("lingers", Some(0), record(0)).await.unwrap();
    assert!(
        sent.elapsed() < Duration::from_millis(150),
        "send returned at once"
    );
    assert_eq!(read(&node, "lingers", 1, Duration::from_secs(10)).await, 1);
    let results = producer.close(Duration::from_secs(10)).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].partition, results[0].offset), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_size_sends_before_a_long_linger() {
    let node = Node::start(&[]);
    create_topic(&node, "fills", 1).await;
    let producer = BackgroundProducer::new(client(&node).await, config("60000", "1024")).unwrap();
    for i in 0..30 {
        producer.send("fills", Some(0), record(i)).await.unwrap();
    }
    // 30 records of ~100 bytes fill several 1 KiB batches; only the last may wait.
    assert!(read(&node, "fills", 20, Duration::from_secs(10)).await >= 20);
    producer.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_drains_the_buffer_in_order() {
    let node = Node::start(&[]);
    create_topic(&node, "drains", 1).await;
    let producer = BackgroundProducer::new(client(&node).await, config("60000", "16384")).unwrap();
    for i in 0..10 {
        producer.send("drains", Some(0), record(i)).await.unwrap();
    }
    let results = producer.close(Duration::from_secs(10)).await.unwrap();
    let offsets: Vec<i64> = results.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    assert_eq!(read(&node, "drains", 10, Duration::from_secs(10)).await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_and_exactly_once_hold_across_a_broker_restart() {
    let mut node = Node::start(&[]);
    create_topic(&node, "restarts", 1).await;
    let producer = BackgroundProducer::new(client(&node).await, config("20", "2048")).unwrap();
    for i in 0..100 {
        producer.send("restarts", Some(0), record(i)).await.unwrap();
        if i % 10 == 9 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(node.stop(), "clean stop");
    for i in 100..200 {
        producer.send("restarts", Some(0), record(i)).await.unwrap();
    }
    node.restart();
    let results = producer.close(Duration::from_secs(60)).await.unwrap();
    let offsets: Vec<i64> = results.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<_>>());

    let mut c = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    c.fetch.max_wait = Duration::from_millis(50);
    let mut consumer = Consumer::new(client(&node).await, c).unwrap();
    consumer.assign(&[("restarts".to_string(), 0)]).unwrap();
    let mut values = Vec::new();
    let started = Instant::now();
    while values.len() < 200 && started.elapsed() < Duration::from_secs(20) {
        for r in consumer.poll(Duration::from_millis(100)).await.unwrap() {
            values.push(r.value.clone().unwrap());
        }
    }
    // Nothing more behind them: no duplicate was written.
    values.extend(
        consumer
            .poll(Duration::from_millis(500))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| r.value.clone()),
    );
    let expected: Vec<Bytes> = (0..200).map(|i| Bytes::from(format!("{i:0100}"))).collect();
    assert_eq!(values, expected);
}
