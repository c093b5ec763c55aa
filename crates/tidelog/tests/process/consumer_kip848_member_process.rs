//! A `group.protocol=consumer` member's own life against a real `tidelog serve`: one
//! that stops polling leaves (its partitions move), is told it lost them when it polls
//! again and rejoins at epoch 0; a static member closes with epoch -2, keeps its place,
//! and its successor with the same `group.instance.id` gets the same partitions back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::Node;
use tidelog_client::{
    Client, Consumer, ConsumerConfig, OffsetReset, RebalanceListener, TopicPartition,
};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

async fn setup(topic: &str, partitions: i32) -> Node {
    let node = Node::start(&[
        "group.consumer.heartbeat.interval.ms=200",
        "group.consumer.min.heartbeat.interval.ms=100",
    ]);
    support::native::create_topic(&node, topic, partitions).await;
    node
}

async fn consumer(node: &Node, group: &str, topic: &str, c: ConsumerConfig) -> Consumer {
    let mut c = ConsumerConfig {
        group_id: Some(group.into()),
        ..c
    };
    c.set("group.protocol", "consumer").unwrap();
    c.auto_offset_reset = OffsetReset::Earliest;
    c.fetch.max_wait = Duration::from_millis(50);
    let client = Client::connect_to(&node.kafka.to_string()).await.unwrap();
    let mut consumer = Consumer::new(client, c).unwrap();
    consumer.subscribe(&[topic]).unwrap();
    consumer
}

type Event = (&'static str, Vec<TopicPartition>);

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Event>>>);

impl RebalanceListener for Events {
    fn on_revoked(&mut self, partitions: &[TopicPartition]) {
        self.0
            .lock()
            .unwrap()
            .push(("revoked", partitions.to_vec()));
    }
    fn on_assigned(&mut self, partitions: &[TopicPartition]) {
        self.0
            .lock()
            .unwrap()
            .push(("assigned", partitions.to_vec()));
    }
    fn on_lost(&mut self, partitions: &[TopicPartition]) {
        self.0.lock().unwrap().push(("lost", partitions.to_vec()));
    }
}

async fn poll_until(consumer: &mut Consumer, done: impl Fn(&Consumer) -> bool) {
    timeout(LIMIT, async {
        while !done(consumer) {
            consumer.poll(Duration::from_millis(50)).await.unwrap();
        }
    })
    .await
    .expect("in time");
}

/// Polls `a` and `b` in turn until `done`.
async fn poll_both(
    a: &mut Consumer,
    b: &mut Consumer,
    done: impl Fn(&Consumer, &Consumer) -> bool,
) {
    timeout(LIMIT, async {
        while !done(a, b) {
            a.poll(Duration::from_millis(20)).await.unwrap();
            b.poll(Duration::from_millis(20)).await.unwrap();
        }
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_loses_its_partitions_and_rejoins_at_epoch_zero() {
    let node = setup("stall848", 4).await;
    let steady_config = ConsumerConfig::default();
    let mut steady = consumer(&node, "stall848-g", "stall848", steady_config).await;
    poll_until(&mut steady, |c| c.assignment().len() == 4).await;
    let stalling_config = ConsumerConfig {
        max_poll_interval: Duration::from_secs(2),
        ..ConsumerConfig::default()
    };
    let mut stalled = consumer(&node, "stall848-g", "stall848", stalling_config).await;
    let events = Events::default();
    stalled.set_rebalance_listener(Box::new(events.clone()));
    poll_both(&mut steady, &mut stalled, |a, b| {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    let (epoch, _) = stalled.generation().unwrap();
    assert!(epoch > 0);

    // `stalled` stops polling: its heartbeat task leaves after max.poll.interval.ms and
    // the steady member takes everything.
    poll_until(&mut steady, |c| c.assignment().len() == 4).await;
    // Polling again, it hears that it lost its partitions (no commit: another member
    // may have read on) and rejoins as a new member of the group at epoch 0.
    poll_both(&mut steady, &mut stalled, |a, b| {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    let seen = events.0.lock().unwrap().clone();
    let mut kinds: Vec<&str> = seen.iter().map(|(k, _)| *k).collect();
    kinds.dedup();
    assert_eq!(kinds, ["assigned", "lost", "assigned"], "{seen:?}");
    let lost: usize = seen
        .iter()
        .filter(|(k, _)| *k == "lost")
        .map(|(_, p)| p.len())
        .sum();
    assert_eq!(lost, 2);
    stalled.close().await.unwrap();
    steady.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_leaves_with_epoch_minus_two_and_its_successor_gets_its_partitions() {
    let node = setup("static848", 4).await;
    let mut other = consumer(&node, "static848-g", "static848", ConsumerConfig::default()).await;
    let static_config = ConsumerConfig {
        group_instance_id: Some("worker-1".into()),
        ..ConsumerConfig::default()
    };
    let mut first = consumer(&node, "static848-g", "static848", static_config.clone()).await;
    poll_both(&mut other, &mut first, |a, b| {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    let owned = first.assignment();
    let kept = other.assignment();
    first.close().await.unwrap();

    let mut admin = Client::connect_to(&node.kafka.to_string()).await.unwrap();
    let group = admin.describe_group("static848-g").await.unwrap();
    assert_eq!(
        group.members.len(),
        2,
        "a static member keeps its place: {group:?}"
    );
    let mut again = consumer(&node, "static848-g", "static848", static_config).await;
    poll_both(&mut other, &mut again, |a, b| {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    assert_eq!(again.assignment(), owned);
    assert_eq!(other.assignment(), kept, "nobody else's assignment changed");
    again.close().await.unwrap();
    other.close().await.unwrap();
}
