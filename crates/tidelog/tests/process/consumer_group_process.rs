//! Group behaviour of the native `Consumer` against a real `tidelog serve`: the
//! rebalance listener and `max.poll.interval.ms` (a member that stops polling leaves and
//! its partitions move), a static member that closes without leaving and comes back to
//! the same partitions, and asynchronous commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::native::client;
use support::Node;
use tidelog_client::{Consumer, ConsumerConfig, OffsetReset, RebalanceListener, TopicPartition};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

async fn setup(topic: &str, partitions: i32) -> Node {
    let node = Node::start(&["group.initial.rebalance.delay.ms=0"]);
    support::native::create_topic(&node, topic, partitions).await;
    node
}

fn config(group: &str) -> ConsumerConfig {
    let mut c = ConsumerConfig::for_group(group);
    c.auto_offset_reset = OffsetReset::Earliest;
    c.session_timeout = Duration::from_secs(10);
    c.heartbeat_interval = Duration::from_millis(300);
    c.fetch.max_wait = Duration::from_millis(100);
    c
}

/// One listener call: "assigned" or "revoked", and its partitions.
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
}

/// Polls until `done(consumer)`, within the limit.
async fn poll_until(consumer: &mut Consumer, done: impl Fn(&Consumer) -> bool) {
    timeout(LIMIT, async {
        loop {
            consumer.poll(Duration::from_millis(100)).await.unwrap();
            if done(consumer) {
                return;
            }
        }
    })
    .await
    .expect("in time");
}

fn tps(topic: &str, partitions: &[i32]) -> Vec<TopicPartition> {
    partitions.iter().map(|p| (topic.to_string(), *p)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_leaves_and_its_partitions_move() {
    let node = setup("stall", 4).await;
    let mut c = config("stallers");
    c.max_poll_interval = Duration::from_secs(2);
    let events = Events::default();
    let mut steady = Consumer::new(client(&node).await, c.clone()).unwrap();
    steady.set_rebalance_listener(Box::new(events.clone()));
    steady.subscribe(&["stall"]).unwrap();
    poll_until(&mut steady, |c| c.assignment().len() == 4).await;

    // The second member polls (in its own task: a join waits for every member to
    // rejoin) until it owns two partitions, then stops polling but stays alive.
    let mut stalled = Consumer::new(client(&node).await, c).unwrap();
    stalled.subscribe(&["stall"]).unwrap();
    let (split_tx, split_rx) = tokio::sync::oneshot::channel();
    let stalling = tokio::spawn(async move {
        poll_until(&mut stalled, |c| c.assignment().len() == 2).await;
        let _ = split_tx.send(());
        tokio::time::sleep(Duration::from_secs(20)).await;
        drop(stalled);
    });
    let mut split_rx = split_rx;
    timeout(LIMIT, async {
        loop {
            steady.poll(Duration::from_millis(50)).await.unwrap();
            if split_rx.try_recv().is_ok() {
                return;
            }
        }
    })
    .await
    .expect("the group splits");
    // After max.poll.interval.ms the stalled member's task leaves the group.
    poll_until(&mut steady, |c| c.assignment().len() == 4).await;
    assert_eq!(steady.assignment(), tps("stall", &[0, 1, 2, 3]));
    let seen = events.0.lock().unwrap().clone();
    let kinds: Vec<&str> = seen.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds,
        ["assigned", "revoked", "assigned", "revoked", "assigned"],
        "{seen:?}"
    );
    assert_eq!(seen[1].1, tps("stall", &[0, 1, 2, 3]));
    assert_eq!(seen[2].1.len(), 2);
    assert_eq!(seen[4].1, tps("stall", &[0, 1, 2, 3]));
    steady.close().await.unwrap();
    stalling.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_closes_without_leaving_and_returns_to_its_partitions() {
    let node = setup("static", 2).await;
    let mut c = config("statics");
    c.group_instance_id = Some("worker-1".into());
    let mut first = Consumer::new(client(&node).await, c.clone()).unwrap();
    first.subscribe(&["static"]).unwrap();
    poll_until(&mut first, |c| c.assignment().len() == 2).await;
    let (generation, _) = first.generation().unwrap();
    first.close().await.unwrap();

    let mut admin = client(&node).await;
    let group = admin.describe_group("statics").await.unwrap();
    assert_eq!(
        group.members.len(),
        1,
        "a static member does not leave on close"
    );
    assert_eq!(group.members[0].instance_id.as_deref(), Some("worker-1"));

    let mut again = Consumer::new(client(&node).await, c).unwrap();
    again.subscribe(&["static"]).unwrap();
    poll_until(&mut again, |c| c.assignment().len() == 2).await;
    assert_eq!(again.assignment(), tps("static", &[0, 1]));
    let (rejoined, _) = again.generation().unwrap();
    assert!(rejoined >= generation);
    again.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asynchronous_commit_reaches_the_coordinator() {
    let node = setup("async", 1).await;
    let mut c = config("asyncs");
    c.enable_auto_commit = false;
    let mut consumer = Consumer::new(client(&node).await, c).unwrap();
    consumer.subscribe(&["async"]).unwrap();
    poll_until(&mut consumer, |c| c.assignment().len() == 1).await;
    let tp = ("async".to_string(), 0);
    consumer.seek(&tp, 0).unwrap();
    let first = consumer.commit_async().await.unwrap();
    consumer
        .commit_offsets_sync(&[(tp.clone(), 0)])
        .await
        .unwrap();
    first.wait().await.unwrap();
    let committed = client(&node)
        .await
        .committed_offsets("asyncs")
        .await
        .unwrap();
    assert_eq!(committed.get(&tp), Some(&0));
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_returns_within_its_timeout_while_a_rebalance_waits_for_others() {
    let node = setup("turns", 4).await;
    let c = config("turn-takers");
    let mut first = Consumer::new(client(&node).await, c.clone()).unwrap();
    first.subscribe(&["turns"]).unwrap();
    poll_until(&mut first, |c| c.assignment().len() == 4).await;
    let mut second = Consumer::new(client(&node).await, c).unwrap();
    second.subscribe(&["turns"]).unwrap();
    // One task polls both in turn: the second's join is held by the coordinator until
    // the first rejoins, which only happens if the second's poll gives the turn back.
    timeout(LIMIT, async {
        while !(first.assignment().len() == 2 && second.assignment().len() == 2) {
            for consumer in [&mut first, &mut second] {
                let started = std::time::Instant::now();
                consumer.poll(Duration::from_millis(100)).await.unwrap();
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{:?}",
                    started.elapsed()
                );
            }
        }
    })
    .await
    .expect("the group splits while both are polled from one task");
    let mut all = first.assignment();
    all.extend(second.assignment());
    all.sort();
    assert_eq!(all, tps("turns", &[0, 1, 2, 3]));
    first.close().await.unwrap();
    second.close().await.unwrap();
}
