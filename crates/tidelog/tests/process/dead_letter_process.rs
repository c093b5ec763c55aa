//! The client's dead-letter helper against a real `tidelog serve`: a poison record is
//! tried N times, lands once in the dead-letter topic with the KIP-1191 headers and its
//! bytes intact, and its partition keeps flowing to the end, committed; a copy that
//! cannot be written is an error the caller does not commit past.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use support::native::{client, create_topic};
use support::Node;
use tidelog_client::dead_letter::{
    Backoff, DeadLetterError, DeadLetterHandler, DeadLetterOrigin, DeadLetterPolicy, Outcome,
};
use tidelog_client::{
    Consumer, ConsumerConfig, FetchOptions, OffsetReset, ProduceRecord, Producer, ProducerConfig,
};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 3;
const POISON_OFFSET: i64 = 4;
/// Not UTF-8 and with a zero byte, so a lossy copy would show.
const POISON: &[u8] = b"poison\x00\xff\xfe";
const ERROR: &str = "cannot parse the amount: not UTF-8";

async fn create(node: &Node, topic: &str) {
    create_topic(node, topic, 1).await;
}

fn key(i: i64) -> Bytes {
    Bytes::from(format!("key-{i}"))
}

fn value(i: i64) -> Bytes {
    if i == POISON_OFFSET {
        Bytes::from_static(POISON)
    } else {
        Bytes::from(format!("{}", i * 100))
    }
}

/// The application's handler: credits an amount, fails on anything not UTF-8.
fn parse(value: Option<&[u8]>) -> Result<i64, String> {
    let text = std::str::from_utf8(value.unwrap_or_default()).map_err(|_| ERROR.to_owned())?;
    text.parse().map_err(|e| format!("{e}"))
}

/// A node with `orders` (one partition) holding records 0..10, record 4 the poison one,
/// each with a `trace` header.
async fn start_with_orders() -> Node {
    let node = Node::start(&["group.initial.rebalance.delay.ms=0"]);
    create(&node, "orders").await;
    let mut producer = Producer::new(client(&node).await, ProducerConfig::default());
    for i in 0..10 {
        let mut r = ProduceRecord::new(Some(key(i)), Some(value(i)));
        r.headers = vec![("trace".into(), Some(Bytes::from(format!("t{i}"))))];
        producer.send("orders", Some(0), r).await.unwrap();
    }
    producer.flush().await.unwrap();
    node
}

/// A member of group `ledger` reading `orders`, and its dead-letter handler.
async fn consumer_and_handler(
    node: &Node,
    policy: DeadLetterPolicy,
) -> (Consumer, DeadLetterHandler) {
    let mut config = ConsumerConfig::for_group("ledger");
    config.auto_offset_reset = OffsetReset::Earliest;
    config.enable_auto_commit = false;
    config.session_timeout = Duration::from_secs(10);
    config.heartbeat_interval = Duration::from_millis(500);
    config.fetch.max_wait = Duration::from_millis(200);
    let mut consumer = Consumer::new(client(node).await, config).unwrap();
    consumer.subscribe(&["orders"]).unwrap();
    let dlq = DeadLetterHandler::for_consumer(client(node).await, &consumer, policy).unwrap();
    (consumer, dlq)
}

/// N attempts, short waits.
fn policy(topic: &str) -> DeadLetterPolicy {
    let mut policy = DeadLetterPolicy::to_topic(topic);
    policy.max_attempts = ATTEMPTS;
    policy.backoff = Backoff {
        initial: Duration::from_millis(20),
        multiplier: 2.0,
        max: Duration::from_millis(50),
    };
    policy
}

async fn committed(node: &Node) -> Option<i64> {
    let offsets = client(node)
        .await
        .committed_offsets("ledger")
        .await
        .unwrap();
    offsets.get(&("orders".to_string(), 0)).copied()
}

/// Every record of the dead-letter topic's partition 0.
async fn copies(node: &Node, topic: &str) -> Vec<tidelog_client::ConsumedRecord> {
    let fetched = client(node)
        .await
        .fetch(topic, 0, 0, &FetchOptions::default())
        .await
        .unwrap();
    assert_eq!(fetched.high_watermark, fetched.records.len() as i64);
    fetched.records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_is_dead_lettered_after_n_attempts_and_the_partition_flows_on() {
    let node = start_with_orders().await;
    create(&node, "dlq.orders").await;
    let (mut consumer, mut dlq) = consumer_and_handler(&node, policy("dlq.orders")).await;

    let mut attempts: BTreeMap<i64, u32> = BTreeMap::new();
    let mut credited: Vec<(i64, i64)> = Vec::new();
    let mut outcomes: BTreeMap<i64, Outcome> = BTreeMap::new();
    timeout(LIMIT, async {
        while consumer.position(&("orders".into(), 0)) != Some(10) {
            for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                let outcome = dlq
                    .process(&record, async |r| {
                        *attempts.entry(r.offset).or_default() += 1;
                        let cents = parse(r.value.as_deref())?;
                        credited.push((r.offset, cents));
                        Ok::<(), String>(())
                    })
                    .await
                    .unwrap();
                assert!(outcomes.insert(record.offset, outcome).is_none());
                let tp = (record.topic.clone(), record.partition);
                consumer
                    .commit_offsets_sync(&[(tp, record.offset + 1)])
                    .await
                    .unwrap();
            }
        }
    })
    .await
    .expect("every record is settled in time");
    consumer.close().await.unwrap();

    // Tried exactly N times; every other record handled once, in order.
    let wanted_attempts: BTreeMap<i64, u32> = (0..10)
        .map(|i| (i, if i == POISON_OFFSET { ATTEMPTS } else { 1 }))
        .collect();
    assert_eq!(attempts, wanted_attempts);
    let wanted_credits: Vec<(i64, i64)> = (0..10)
        .filter(|i| *i != POISON_OFFSET)
        .map(|i| (i, i * 100))
        .collect();
    assert_eq!(credited, wanted_credits);
    for (offset, outcome) in &outcomes {
        match outcome {
            Outcome::Handled { attempts } => {
                assert_ne!(*offset, POISON_OFFSET);
                assert_eq!(*attempts, 1);
            }
            Outcome::DeadLettered { attempts, written } => {
                assert_eq!((*offset, *attempts), (POISON_OFFSET, ATTEMPTS));
                assert_eq!((written.partition, written.offset), (0, 0));
            }
        }
    }
    assert_eq!(outcomes.len(), 10);

    // The partition moved on: the group's committed offset is the end.
    assert_eq!(committed(&node).await, Some(10));

    // Exactly one copy, its bytes and headers as the broker's share-group copies name them.
    let copies = copies(&node, "dlq.orders").await;
    assert_eq!(copies.len(), 1, "one copy, written once");
    let copy = &copies[0];
    assert_eq!(copy.key.as_deref(), Some(&key(POISON_OFFSET)[..]));
    assert_eq!(copy.value.as_deref(), Some(POISON));
    let text = |v: &str| Some(Bytes::from(v.to_owned()));
    assert_eq!(
        copy.headers,
        vec![
            ("trace".to_owned(), text("t4")),
            ("__dlq.errors.topic".to_owned(), text("orders")),
            ("__dlq.errors.partition".to_owned(), text("0")),
            ("__dlq.errors.offset".to_owned(), text("4")),
            ("__dlq.errors.group".to_owned(), text("ledger")),
            ("__dlq.errors.delivery.count".to_owned(), text("3")),
            ("__dlq.errors.message".to_owned(), text(ERROR)),
        ]
    );
    let origin = DeadLetterOrigin::of(&copy.headers).unwrap();
    assert_eq!(
        origin,
        DeadLetterOrigin {
            topic: "orders".into(),
            partition: 0,
            offset: POISON_OFFSET,
            group: "ledger".into(),
            delivery_count: ATTEMPTS,
            message: ERROR.into(),
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_cannot_be_written_is_an_error_and_nothing_is_committed_past_it() {
    let node = start_with_orders().await;
    // The dead-letter topic does not exist and may not be auto-created.
    let mut policy = policy("dlq.missing");
    policy.allow_auto_create = false;
    let (mut consumer, mut dlq) = consumer_and_handler(&node, policy).await;

    let mut failed = None;
    timeout(LIMIT, async {
        while failed.is_none() {
            for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                let settled = dlq
                    .process(&record, async |r| parse(r.value.as_deref()).map(|_| ()))
                    .await;
                match settled {
                    Ok(outcome) => {
                        assert_eq!(outcome, Outcome::Handled { attempts: 1 });
                        let tp = (record.topic.clone(), record.partition);
                        consumer
                            .commit_offsets_sync(&[(tp, record.offset + 1)])
                            .await
                            .unwrap();
                    }
                    Err(e) => {
                        failed = Some((record, e));
                        break;
                    }
                }
            }
        }
    })
    .await
    .expect("the poison record is reached in time");
    let (record, error) = failed.unwrap();
    assert_eq!(record.offset, POISON_OFFSET);
    let DeadLetterError::Produce {
        attempts, message, ..
    } = &error
    else {
        panic!("a produce error, not {error}");
    };
    assert_eq!((*attempts, message.as_str()), (ATTEMPTS, ERROR));
    // The caller did not commit: a restart would see the poison record again.
    assert_eq!(committed(&node).await, Some(POISON_OFFSET));

    // Once the topic exists the copy is retried alone, without running the handler.
    create(&node, "dlq.missing").await;
    let written = dlq.dead_letter(&record, *attempts, message).await.unwrap();
    assert_eq!((written.partition, written.offset), (0, 0));
    let copies = copies(&node, "dlq.missing").await;
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].value.as_deref(), Some(POISON));
    let origin = DeadLetterOrigin::of(&copies[0].headers).unwrap();
    assert_eq!(
        (
            origin.offset,
            origin.delivery_count,
            origin.message.as_str()
        ),
        (POISON_OFFSET, ATTEMPTS, ERROR)
    );
    consumer.close().await.unwrap();
}
