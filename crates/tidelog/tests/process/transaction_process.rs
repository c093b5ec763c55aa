//! Transactions of the native `Producer` against a real `tidelog serve`: a committed
//! transaction over two partitions reaches a read_committed consumer byte for byte and
//! an aborted one does not (read_uncommitted sees it); a second producer with the same
//! `transactional.id` fences the first, whose open transaction is aborted; offsets sent
//! with `send_offsets_to_transaction` become the group's only when the transaction
//! commits; a send failed by a stopped broker leaves the transaction abortable only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use support::native::{client, create_topic as create};
use support::Node;
use tidelog_client::{
    ClientError, Consumer, ConsumerConfig, ConsumerGroupMetadata, IsolationLevel, OffsetReset,
    OffsetSpec, ProduceRecord, Producer, ProducerConfig, TransactionErrorKind,
};

async fn producer(node: &Node, transactional_id: &str) -> Producer {
    let mut config = ProducerConfig::default();
    config
        .set("transactional.id", transactional_id)
        .unwrap()
        .set("transaction.timeout.ms", "30000")
        .unwrap()
        .set("max.block.ms", "30000")
        .unwrap();
    Producer::new(client(node).await, config)
}

/// (partition, key, value, headers) of a record, as written and as read.
type Seen = (
    i32,
    Option<Bytes>,
    Option<Bytes>,
    Vec<(String, Option<Bytes>)>,
);

fn record(tag: &str, i: usize) -> ProduceRecord {
    let mut r = ProduceRecord::new(
        Some(Bytes::from(format!("{tag}-key-{i}"))),
        Some(Bytes::from(format!(
            "{tag}-value-{i}-{}",
            "x".repeat(i * 7)
        ))),
    );
    r.headers = vec![("h".into(), Some(Bytes::from(vec![0u8, 255, i as u8])))];
    r
}

/// Sends `count` records of `tag` alternately to partitions 0 and 1; returns them.
async fn send_both(p: &mut Producer, topic: &str, tag: &str, count: usize) -> Vec<Seen> {
    let mut sent = Vec::new();
    for i in 0..count {
        let partition = (i % 2) as i32;
        let r = record(tag, i);
        sent.push((partition, r.key.clone(), r.value.clone(), r.headers.clone()));
        p.send(topic, Some(partition), r).await.unwrap();
    }
    sent
}

/// Everything in `topic` (partitions 0..partitions) up to the log end, per partition in
/// offset order.
async fn read_all(
    node: &Node,
    topic: &str,
    partitions: i32,
    isolation: IsolationLevel,
) -> Vec<Seen> {
    let mut ends = Vec::new();
    let mut c = client(node).await;
    for p in 0..partitions {
        ends.push(c.list_offsets(topic, p, OffsetSpec::Latest).await.unwrap());
    }
    let mut config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        isolation_level: isolation,
        ..ConsumerConfig::default()
    };
    config.fetch.max_wait = Duration::from_millis(100);
    let mut consumer = Consumer::new(client(node).await, config).unwrap();
    let tps: Vec<(String, i32)> = (0..partitions).map(|p| (topic.to_owned(), p)).collect();
    consumer.assign(&tps).unwrap();
    let mut seen: Vec<(i32, i64, Seen)> = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while tps
            .iter()
            .zip(&ends)
            .any(|(tp, end)| consumer.position(tp).is_none_or(|p| p < *end))
        {
            for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                seen.push((
                    r.partition,
                    r.offset,
                    (
                        r.partition,
                        r.key.clone(),
                        r.value.clone(),
                        r.headers.clone(),
                    ),
                ));
            }
        }
    })
    .await
    .expect("the consumer reaches the log end");
    seen.sort_by_key(|(p, o, _)| (*p, *o));
    seen.into_iter().map(|(_, _, s)| s).collect()
}

fn by_partition(mut records: Vec<Seen>) -> Vec<Seen> {
    records.sort_by_key(|r| r.0);
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transaction_is_read_committed_and_aborted_one_is_not() {
    let node = Node::start(&[]);
    create(&node, "tx", 2).await;
    let mut p = producer(&node, "tx-commit-abort").await;
    // Before init_transactions nothing may be sent.
    let early = p.send("tx", Some(0), record("early", 0)).await.unwrap_err();
    assert!(
        matches!(
            early,
            ClientError::Transaction {
                kind: TransactionErrorKind::InvalidState,
                ..
            }
        ),
        "{early}"
    );
    p.init_transactions().await.unwrap();

    p.begin_transaction().unwrap();
    let committed = send_both(&mut p, "tx", "commit", 10).await;
    let results = p.commit_transaction().await.unwrap();
    assert_eq!(results.len(), 10);

    p.begin_transaction().unwrap();
    let aborted = send_both(&mut p, "tx", "abort", 6).await;
    // Written to the log, then aborted.
    p.flush().await.unwrap();
    let (_, epoch_before) = p.producer_id().unwrap();
    p.abort_transaction().await.unwrap();
    let (_, epoch_after) = p.producer_id().unwrap();
    assert!(
        epoch_after > epoch_before,
        "abort takes a new epoch ({epoch_before} -> {epoch_after})"
    );
    // Buffered, never sent, then aborted: dropped.
    p.begin_transaction().unwrap();
    send_both(&mut p, "tx", "dropped", 2).await;
    p.abort_transaction().await.unwrap();

    // The producer goes on after aborts.
    p.begin_transaction().unwrap();
    let later = send_both(&mut p, "tx", "later", 4).await;
    p.commit_transaction().await.unwrap();

    let mut expected = committed.clone();
    expected.extend(later.clone());
    assert_eq!(
        read_all(&node, "tx", 2, IsolationLevel::ReadCommitted).await,
        by_partition(expected)
    );
    let mut everything = committed;
    everything.extend(aborted);
    everything.extend(later);
    assert_eq!(
        read_all(&node, "tx", 2, IsolationLevel::ReadUncommitted).await,
        by_partition(everything)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_id_fences_the_first() {
    let node = Node::start(&[]);
    create(&node, "fence", 2).await;
    let mut first = producer(&node, "tx-fence").await;
    first.init_transactions().await.unwrap();
    first.begin_transaction().unwrap();
    let zombie = send_both(&mut first, "fence", "zombie", 4).await;
    first.flush().await.unwrap();

    let mut second = producer(&node, "tx-fence").await;
    second.init_transactions().await.unwrap();
    second.begin_transaction().unwrap();
    let fresh = send_both(&mut second, "fence", "fresh", 4).await;
    second.commit_transaction().await.unwrap();

    let fenced = first.commit_transaction().await.unwrap_err();
    assert!(
        matches!(
            fenced,
            ClientError::Transaction {
                kind: TransactionErrorKind::Fatal,
                ..
            }
        ),
        "{fenced}"
    );
    assert!(fenced.to_string().contains("fenced"), "{fenced}");
    // The fenced producer refuses everything afterwards.
    for e in [
        first.begin_transaction().unwrap_err(),
        first.abort_transaction().await.unwrap_err(),
        first
            .send("fence", Some(0), record("z", 9))
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                ClientError::Transaction {
                    kind: TransactionErrorKind::Fatal,
                    ..
                }
            ),
            "{e}"
        );
    }

    assert_eq!(
        read_all(&node, "fence", 2, IsolationLevel::ReadCommitted).await,
        by_partition(fresh.clone())
    );
    let mut everything = zombie;
    everything.extend(fresh);
    assert_eq!(
        read_all(&node, "fence", 2, IsolationLevel::ReadUncommitted).await,
        by_partition(everything)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_count_only_when_it_commits() {
    let node = Node::start(&[]);
    create(&node, "in", 1).await;
    create(&node, "out", 2).await;
    let mut admin = client(&node).await;
    let group = ConsumerGroupMetadata::new("txg");
    let committed = |m: BTreeMap<(String, i32), i64>| m.get(&("in".to_owned(), 0)).copied();

    let mut p = producer(&node, "tx-offsets").await;
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    send_both(&mut p, "out", "o", 2).await;
    let offsets = BTreeMap::from([(("in".to_owned(), 0), 5)]);
    p.send_offsets_to_transaction(&offsets, &group)
        .await
        .unwrap();
    p.flush().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("txg").await.unwrap()),
        None,
        "offsets of an open transaction are not the group's yet"
    );
    p.commit_transaction().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("txg").await.unwrap()),
        Some(5)
    );

    p.begin_transaction().unwrap();
    send_both(&mut p, "out", "o2", 2).await;
    let offsets = BTreeMap::from([(("in".to_owned(), 0), 9)]);
    p.send_offsets_to_transaction(&offsets, &group)
        .await
        .unwrap();
    p.abort_transaction().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("txg").await.unwrap()),
        Some(5),
        "an aborted transaction's offsets are dropped"
    );

    // Offsets alone (no records) commit too.
    p.begin_transaction().unwrap();
    let offsets = BTreeMap::from([(("in".to_owned(), 0), 12)]);
    p.send_offsets_to_transaction(&offsets, &group)
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("txg").await.unwrap()),
        Some(12)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_leaves_the_transaction_abortable_only() {
    let mut node = Node::start(&[]);
    create(&node, "flaky", 2).await;
    let mut p = producer(&node, "tx-flaky").await;
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    let written = send_both(&mut p, "flaky", "written", 2).await;
    p.flush().await.unwrap();

    // The broker goes away: the next flush runs out of retries and fails.
    node.stop();
    send_both(&mut p, "flaky", "lost", 2).await;
    p.flush().await.unwrap_err();
    for e in [
        p.commit_transaction().await.unwrap_err(),
        p.send("flaky", Some(0), record("refused", 0))
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                ClientError::Transaction {
                    kind: TransactionErrorKind::Abortable,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("abort_transaction"), "{e}");
    }

    // Abort is allowed (once the coordinator is back), and the producer goes on.
    node.restart();
    p.abort_transaction().await.unwrap();
    p.begin_transaction().unwrap();
    let after = send_both(&mut p, "flaky", "after", 2).await;
    p.commit_transaction().await.unwrap();

    assert_eq!(
        read_all(&node, "flaky", 2, IsolationLevel::ReadCommitted).await,
        by_partition(after.clone())
    );
    let uncommitted = read_all(&node, "flaky", 2, IsolationLevel::ReadUncommitted).await;
    for r in written.iter().chain(&after) {
        assert!(uncommitted.contains(r), "{r:?} in {uncommitted:?}");
    }
}

/// Read-process-write as an application runs it: the offsets go with the live member's
/// generation and member id, which the group coordinator checks. Offsets sent for a
/// generation the member has left behind are refused (ILLEGAL_GENERATION, as Kafka
/// answers), the transaction can then only be aborted, and the group keeps the offsets
/// of the committed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_with_a_live_members_generation_commit_and_a_stale_one_is_refused() {
    let node = Node::start(&[]);
    create(&node, "live-in", 1).await;
    create(&node, "live-out", 2).await;
    let mut admin = client(&node).await;
    let mut config = ConsumerConfig::for_group("live-txg");
    config.auto_offset_reset = OffsetReset::Earliest;
    config.heartbeat_interval = Duration::from_millis(300);
    let mut consumer = Consumer::new(client(&node).await, config).unwrap();
    consumer.subscribe(&["live-in"]).unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while consumer.assignment().is_empty() {
            consumer.poll(Duration::from_millis(100)).await.unwrap();
        }
    })
    .await
    .expect("the member is assigned a partition in time");
    let member = consumer.group_metadata().expect("a group member");
    assert!(member.generation_id >= 1, "{member:?}");
    assert!(!member.member_id.is_empty(), "{member:?}");
    let committed = |m: BTreeMap<(String, i32), i64>| m.get(&("live-in".to_owned(), 0)).copied();

    let mut p = producer(&node, "tx-live").await;
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    send_both(&mut p, "live-out", "o", 2).await;
    let offsets = BTreeMap::from([(("live-in".to_owned(), 0), 3)]);
    p.send_offsets_to_transaction(&offsets, &member)
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("live-txg").await.unwrap()),
        Some(3)
    );

    let mut stale = member.clone();
    stale.generation_id -= 1;
    p.begin_transaction().unwrap();
    let offsets = BTreeMap::from([(("live-in".to_owned(), 0), 7)]);
    let refused = p.send_offsets_to_transaction(&offsets, &stale).await;
    assert!(refused.is_err(), "a stale generation's offsets were taken");
    assert!(
        p.commit_transaction().await.is_err(),
        "a transaction whose offsets were refused committed"
    );
    p.abort_transaction().await.unwrap();
    assert_eq!(
        committed(admin.committed_offsets("live-txg").await.unwrap()),
        Some(3)
    );
    consumer.close().await.unwrap();
}
