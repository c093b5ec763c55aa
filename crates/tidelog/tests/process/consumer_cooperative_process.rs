//! Incremental cooperative rebalancing (KIP-429, `cooperative-sticky`) of native classic
//! members against a real `tidelog serve`: three members split a topic, a fourth joins,
//! and only the partitions it takes are revoked from the others, who keep the rest (and
//! keep reading them) throughout; every record produced meanwhile is handled exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use support::native::client;
use support::Node;
use tidelog_client::{
    AssignmentStrategy, Consumer, ConsumerConfig, OffsetReset, ProduceRecord, Producer,
    ProducerConfig, RebalanceListener, TopicPartition,
};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(90);
const PARTITIONS: i32 = 12;

fn config(group: &str) -> ConsumerConfig {
    let mut c = ConsumerConfig::for_group(group);
    c.auto_offset_reset = OffsetReset::Earliest;
    c.session_timeout = Duration::from_secs(10);
    c.heartbeat_interval = Duration::from_millis(300);
    c.fetch.max_wait = Duration::from_millis(50);
    c.assignment_strategies = vec![AssignmentStrategy::CooperativeSticky];
    c
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

struct Member {
    consumer: Consumer,
    events: Events,
    /// The assignment after every poll.
    seen: Vec<BTreeSet<TopicPartition>>,
}

impl Member {
    async fn start(node: &Node, group: &str) -> Member {
        let events = Events::default();
        let mut consumer = Consumer::new(client(node).await, config(group)).unwrap();
        consumer.set_rebalance_listener(Box::new(events.clone()));
        consumer.subscribe(&["coop"]).unwrap();
        Member {
            consumer,
            events,
            seen: Vec::new(),
        }
    }

    fn owned(&self) -> BTreeSet<TopicPartition> {
        self.consumer.assignment().into_iter().collect()
    }
}

/// Handled records: (partition, offset) -> how many times, and by whom.
type Handled = BTreeMap<(i32, i64), Vec<usize>>;

/// Polls every member in turn (one task, as a rebalance needs all of them to rejoin)
/// until `done`.
async fn poll_all(
    members: &mut [Member],
    handled: &mut Handled,
    done: impl Fn(&[Member], &Handled) -> bool,
) {
    timeout(LIMIT, async {
        loop {
            for (i, m) in members.iter_mut().enumerate() {
                for r in m.consumer.poll(Duration::from_millis(50)).await.unwrap() {
                    handled.entry((r.partition, r.offset)).or_default().push(i);
                }
                let owned = m.owned();
                m.seen.push(owned);
            }
            if done(members, handled) {
                return;
            }
        }
    })
    .await
    .expect("in time");
}

fn split_evenly(members: &[Member], each: usize) -> bool {
    let all: BTreeSet<TopicPartition> = members.iter().flat_map(Member::owned).collect();
    let total: usize = members.iter().map(|m| m.owned().len()).sum();
    all.len() == PARTITIONS as usize
        && total == all.len()
        && members.iter().all(|m| m.owned().len() == each)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fourth_member_takes_only_its_share_and_the_others_keep_reading_the_rest() {
    let node = Node::start(&["group.initial.rebalance.delay.ms=0"]);
    support::native::create_topic(&node, "coop", PARTITIONS).await;

    // A steady trickle into every partition for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let producing = {
        let (stop, mut producer) = (
            stop.clone(),
            Producer::new(client(&node).await, ProducerConfig::default()),
        );
        tokio::spawn(async move {
            let mut produced = 0i64;
            while !stop.load(Ordering::Relaxed) {
                for p in 0..PARTITIONS {
                    let value = Bytes::from(format!("r{produced}-{p}"));
                    producer
                        .send("coop", Some(p), ProduceRecord::new(None, Some(value)))
                        .await
                        .unwrap();
                }
                producer.flush().await.unwrap();
                produced += 1;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            produced
        })
    };

    let mut handled = Handled::new();
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(Member::start(&node, "coops").await);
    }
    poll_all(&mut members, &mut handled, |ms, _| split_evenly(ms, 4)).await;
    let before: Vec<BTreeSet<TopicPartition>> = members.iter().map(Member::owned).collect();
    for m in &mut members {
        m.events.0.lock().unwrap().clear();
        m.seen.clear();
    }
    let handled_before: BTreeSet<(i32, i64)> = handled.keys().copied().collect();

    members.push(Member::start(&node, "coops").await);
    poll_all(&mut members, &mut handled, |ms, _| split_evenly(ms, 3)).await;
    let newcomer = members[3].owned();
    let mut moved = BTreeSet::new();
    for (i, m) in members[..3].iter().enumerate() {
        let after = m.owned();
        let kept: BTreeSet<_> = before[i].intersection(&after).cloned().collect();
        assert_eq!(kept, after, "member {i} gained nothing");
        let lost: BTreeSet<_> = before[i].difference(&after).cloned().collect();
        assert_eq!(lost.len(), 1, "member {i} gave up one partition");
        // Revoked exactly what moved, in one call, and nothing was lost or re-assigned.
        let events = m.events.0.lock().unwrap().clone();
        assert_eq!(
            events,
            vec![("revoked", lost.iter().cloned().collect::<Vec<_>>())],
            "member {i}"
        );
        // It never stopped owning the rest: every poll through the rebalance had it.
        assert!(
            m.seen.iter().all(|owned| owned.is_superset(&kept)),
            "member {i} kept {kept:?} throughout"
        );
        moved.extend(lost);
    }
    assert_eq!(
        moved, newcomer,
        "the newcomer got exactly the moved partitions"
    );
    assert_eq!(
        members[3].events.0.lock().unwrap().clone(),
        vec![("assigned", newcomer.iter().cloned().collect::<Vec<_>>())]
    );

    // The old members handled records of their kept partitions during the rebalance.
    let kept_partitions: BTreeSet<i32> = members[..3]
        .iter()
        .flat_map(|m| m.owned().into_iter().map(|tp| tp.1))
        .collect();
    let during = handled
        .iter()
        .filter(|(key, by)| {
            !handled_before.contains(key)
                && kept_partitions.contains(&key.0)
                && by.iter().any(|&i| i < 3)
        })
        .count();
    assert!(
        during > 0,
        "the old members kept reading through the rebalance"
    );

    // Stop producing, then drain: every record handled exactly once, by one member.
    stop.store(true, Ordering::Relaxed);
    let rounds = producing.await.unwrap();
    let expected = usize::try_from(rounds).unwrap() * PARTITIONS as usize;
    poll_all(&mut members, &mut handled, |_, h| h.len() >= expected).await;
    let twice: Vec<_> = handled.iter().filter(|(_, by)| by.len() != 1).collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    let all: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (0..rounds).map(move |o| (p, o)))
        .collect();
    assert_eq!(handled.keys().copied().collect::<BTreeSet<_>>(), all);
    for m in members {
        m.consumer.close().await.unwrap();
    }
}
