//! The native `Consumer` (tidelog-client) against a real `tidelog serve`: a group of
//! three splits a topic, a restarted member resumes from its committed offset,
//! seek-to-time lands on the right record, and pause stops only the paused partition.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use support::native::{client, create_topic as create};
use support::Node;
use tidelog_client::{
    Consumer, ConsumerConfig, OffsetReset, OffsetSpec, ProduceRecord, Producer, ProducerConfig,
};
use tokio::time::{timeout, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn start() -> Node {
    Node::start(&["group.initial.rebalance.delay.ms=0"])
}

/// Produces `values` to `partition` (None: by key), with optional timestamps.
async fn produce(node: &Node, topic: &str, records: Vec<(Option<i32>, ProduceRecord)>) {
    let mut producer = Producer::new(client(node).await, ProducerConfig::default());
    for (partition, record) in records {
        producer.send(topic, partition, record).await.unwrap();
    }
    producer.flush().await.unwrap();
}

fn value(s: String) -> ProduceRecord {
    ProduceRecord::new(Some(Bytes::from(s.clone())), Some(Bytes::from(s)))
}

fn config(group: Option<&str>) -> ConsumerConfig {
    let mut c = match group {
        Some(g) => ConsumerConfig::for_group(g),
        None => ConsumerConfig::default(),
    };
    c.auto_offset_reset = OffsetReset::Earliest;
    c.session_timeout = Duration::from_secs(10);
    c.heartbeat_interval = Duration::from_millis(500);
    c.fetch.max_wait = Duration::from_millis(200);
    c
}

/// What one member saw: its generation and assignment, and each record with the
/// generation it was handled in.
#[derive(Default)]
struct Seen {
    generation: Option<(i32, Vec<(String, i32)>)>,
    records: Vec<(i32, String, i32, i64)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_split_six_partitions_and_handle_every_record_once() {
    let node = start();
    create(&node, "split", 6).await;
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Vec<Arc<Mutex<Seen>>> = (0..3).map(|_| Arc::default()).collect();
    let mut members = Vec::new();
    for s in &seen {
        let mut consumer = Consumer::new(client(&node).await, config(Some("splitters"))).unwrap();
        consumer.subscribe(&["split"]).unwrap();
        let (stop, s) = (stop.clone(), s.clone());
        members.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let records = consumer.poll(Duration::from_millis(200)).await.unwrap();
                let mut s = s.lock().unwrap();
                // Between a rebalance's announcement and its rejoin the member has no
                // generation; what it returned then was fetched in the one before.
                let generation = match consumer.generation() {
                    Some((generation, _)) => {
                        s.generation = Some((generation, consumer.assignment()));
                        generation
                    }
                    None => match &s.generation {
                        Some((generation, _)) => *generation,
                        None => continue,
                    },
                };
                for r in records {
                    s.records
                        .push((generation, r.topic.clone(), r.partition, r.offset));
                }
            }
            consumer.close().await.unwrap();
        }));
    }
    // Wait until the three agree on one generation that covers all six partitions.
    let settled = timeout(LIMIT, async {
        loop {
            let views: Vec<_> = seen
                .iter()
                .map(|s| s.lock().unwrap().generation.clone())
                .collect();
            if let [Some((g0, a0)), Some((g1, a1)), Some((g2, a2))] = &views[..] {
                let all: BTreeSet<_> = a0.iter().chain(a1).chain(a2).collect();
                if g0 == g1
                    && g1 == g2
                    && all.len() == 6
                    && [a0, a1, a2].iter().all(|a| a.len() == 2)
                {
                    return *g0;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the group settles on three members with two partitions each");

    produce(
        &node,
        "split",
        (0..600)
            .map(|i| (Some(i % 6), value(format!("r{i}"))))
            .collect(),
    )
    .await;
    timeout(LIMIT, async {
        while seen
            .iter()
            .map(|s| s.lock().unwrap().records.len())
            .sum::<usize>()
            < 600
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("all 600 records are handled");
    stop.store(true, Ordering::Relaxed);
    for m in members {
        timeout(LIMIT, m).await.unwrap().unwrap();
    }

    let mut handled: BTreeMap<(i32, i32, i64), usize> = BTreeMap::new();
    for s in &seen {
        let s = s.lock().unwrap();
        let (_, assigned) = s.generation.clone().unwrap();
        for (generation, topic, partition, offset) in &s.records {
            assert_eq!(*generation, settled, "no rebalance after the group settled");
            assert!(
                assigned.contains(&(topic.clone(), *partition)),
                "only its own partitions"
            );
            *handled
                .entry((*generation, *partition, *offset))
                .or_default() += 1;
        }
    }
    assert!(
        handled.values().all(|&n| n == 1),
        "a record handled twice in one generation"
    );
    for p in 0..6 {
        let offsets: Vec<i64> = handled.keys().filter(|k| k.1 == p).map(|k| k.2).collect();
        assert_eq!(offsets, (0..100).collect::<Vec<_>>(), "partition {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_member_resumes_from_its_committed_offset() {
    let node = start();
    create(&node, "resume", 1).await;
    produce(
        &node,
        "resume",
        (0..10).map(|i| (Some(0), value(format!("v{i}")))).collect(),
    )
    .await;
    let mut c = config(Some("resumers"));
    c.enable_auto_commit = false;
    c.max_poll_records = 4;

    let mut first = Consumer::new(client(&node).await, c.clone()).unwrap();
    first.subscribe(&["resume"]).unwrap();
    let got = poll_until(&mut first, |n| n >= 1).await;
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3]);
    first.commit_sync().await.unwrap();
    first.close().await.unwrap();

    let mut second = Consumer::new(client(&node).await, c).unwrap();
    second.subscribe(&["resume"]).unwrap();
    let got = poll_until(&mut second, |n| n >= 6).await;
    let values: Vec<_> = got.iter().map(|r| r.value.clone().unwrap()).collect();
    let wanted: Vec<Bytes> = (4..10).map(|i| Bytes::from(format!("v{i}"))).collect();
    assert_eq!(values, wanted, "goes on at offset 4, byte for byte");
    assert_eq!(second.position(&("resume".into(), 0)), Some(10));
    let lag = second.lag();
    assert_eq!((lag[0].end_offset, lag[0].lag), (10, 0));
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_to_time_lands_on_the_first_record_at_or_after_it() {
    let node = start();
    create(&node, "times", 1).await;
    let base = 1_700_000_000_000i64;
    let records = (0..10)
        .map(|i| {
            let mut r = value(format!("t{i}"));
            r.timestamp = Some(base + i * 1000);
            (Some(0), r)
        })
        .collect();
    produce(&node, "times", records).await;
    let mut consumer = Consumer::new(client(&node).await, config(None)).unwrap();
    let tp = ("times".to_string(), 0);
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    assert_eq!(
        consumer
            .seek_to(&tp, OffsetSpec::Timestamp(base + 5500))
            .await
            .unwrap(),
        6
    );
    let got = poll_until(&mut consumer, |n| n >= 4).await;
    assert_eq!(
        got.first().map(|r| (r.offset, r.timestamp)),
        Some((6, base + 6000))
    );
    assert_eq!(
        consumer
            .seek_to(&tp, OffsetSpec::Timestamp(base + 5000))
            .await
            .unwrap(),
        5
    );
    // Later than every record: the end.
    assert_eq!(
        consumer
            .seek_to(&tp, OffsetSpec::Timestamp(base + 99_000))
            .await
            .unwrap(),
        10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_only_the_paused_partition() {
    let node = start();
    create(&node, "paused", 2).await;
    let records = (0..10)
        .map(|i| (Some(i % 2), value(format!("p{}-{}", i % 2, i / 2))))
        .collect();
    produce(&node, "paused", records).await;
    let mut consumer = Consumer::new(client(&node).await, config(None)).unwrap();
    let (p0, p1) = (("paused".to_string(), 0), ("paused".to_string(), 1));
    consumer.assign(&[p0.clone(), p1.clone()]).unwrap();
    consumer.pause(std::slice::from_ref(&p0));

    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        got.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
    }
    let partitions: BTreeSet<i32> = got.iter().map(|r| r.partition).collect();
    assert_eq!(
        partitions,
        BTreeSet::from([1]),
        "nothing from the paused partition"
    );
    assert_eq!(got.len(), 5);
    assert_eq!(consumer.position(&p0), Some(0));

    consumer.resume(&[p0]);
    let got = poll_until(&mut consumer, |n| n >= 5).await;
    let values: Vec<_> = got.iter().map(|r| r.value.clone().unwrap()).collect();
    let wanted: Vec<Bytes> = (0..5).map(|i| Bytes::from(format!("p0-{i}"))).collect();
    assert_eq!(values, wanted);
}

/// Polls until `enough(records so far)`, within the test limit.
async fn poll_until(
    consumer: &mut Consumer,
    enough: impl Fn(usize) -> bool,
) -> Vec<tidelog_client::ConsumerRecord> {
    let mut got = Vec::new();
    timeout(LIMIT, async {
        while !enough(got.len()) {
            got.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
        }
    })
    .await
    .expect("records arrive in time");
    got
}
