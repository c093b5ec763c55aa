//! The native `Consumer` with `group.protocol=consumer` (KIP-848) against a real
//! `tidelog serve`: three members split a topic with every partition owned by exactly
//! one member at every point and every record handled once, a fourth member takes only
//! its share, and a member that closes hands its partitions over at once (it leaves with
//! epoch -1) rather than after the session timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::Node;
use tidelog_client::{
    Client, Consumer, ConsumerConfig, GroupProtocol, NewTopic, OffsetReset, ProduceRecord,
    Producer, ProducerConfig, RebalanceListener, TopicPartition,
};
use tokio::time::timeout;

const TOPIC: &str = "kip848";
const GROUP: &str = "kip848-group";
const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 50;
const LIMIT: Duration = Duration::from_secs(60);

async fn client(node: &Node) -> Client {
    Client::connect_to(&node.kafka.to_string()).await.unwrap()
}

/// What the whole group did, as its members' listeners and polls saw it.
#[derive(Default)]
struct Group {
    /// Partition -> the member that owns it now; a second owner is a violation.
    owners: BTreeMap<TopicPartition, usize>,
    violations: Vec<String>,
    /// Per member: ("assigned" | "revoked" | "lost", partitions), in order.
    events: BTreeMap<usize, Vec<(&'static str, Vec<TopicPartition>)>>,
    /// (partition, offset) -> how many times a member handled it.
    handled: BTreeMap<(i32, i64), usize>,
    /// Per member: its assignment after its last poll.
    assignment: BTreeMap<usize, Vec<TopicPartition>>,
}

type Shared = Arc<Mutex<Group>>;

struct Listener {
    member: usize,
    group: Shared,
}

impl Listener {
    fn release(&mut self, kind: &'static str, partitions: &[TopicPartition]) {
        let mut g = self.group.lock().unwrap();
        for tp in partitions {
            if g.owners.get(tp) == Some(&self.member) {
                g.owners.remove(tp);
            }
        }
        g.events
            .entry(self.member)
            .or_default()
            .push((kind, partitions.to_vec()));
    }
}

impl RebalanceListener for Listener {
    fn on_revoked(&mut self, partitions: &[TopicPartition]) {
        self.release("revoked", partitions);
    }
    fn on_lost(&mut self, partitions: &[TopicPartition]) {
        self.release("lost", partitions);
    }
    fn on_assigned(&mut self, partitions: &[TopicPartition]) {
        let mut g = self.group.lock().unwrap();
        for tp in partitions {
            if let Some(other) = g.owners.insert(tp.clone(), self.member) {
                let v = format!("{tp:?} given to {} while {other} owned it", self.member);
                g.violations.push(v);
            }
        }
        g.events
            .entry(self.member)
            .or_default()
            .push(("assigned", partitions.to_vec()));
    }
}

/// A member polling in a task of its own until told to close.
struct Member {
    close: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn start_member(node: &Node, member: usize, group: &Shared) -> Member {
    let mut config = ConsumerConfig::for_group(GROUP);
    config.set("group.protocol", "consumer").unwrap();
    config.set("group.remote.assignor", "uniform").unwrap();
    config.auto_offset_reset = OffsetReset::Earliest;
    config.fetch.max_wait = Duration::from_millis(100);
    assert_eq!(config.group_protocol, GroupProtocol::Consumer);
    let close = Arc::new(AtomicBool::new(false));
    let (stop, group, addr) = (close.clone(), group.clone(), node.kafka.to_string());
    let task = tokio::spawn(async move {
        let client = Client::connect_to(&addr).await.unwrap();
        let mut consumer = Consumer::new(client, config).unwrap();
        consumer.set_rebalance_listener(Box::new(Listener {
            member,
            group: group.clone(),
        }));
        consumer.subscribe(&[TOPIC]).unwrap();
        while !stop.load(Ordering::Relaxed) {
            let records = consumer.poll(Duration::from_millis(100)).await.unwrap();
            let mut g = group.lock().unwrap();
            for r in records {
                *g.handled.entry((r.partition, r.offset)).or_default() += 1;
            }
            g.assignment.insert(member, consumer.assignment());
        }
        consumer.close().await.unwrap();
        group.lock().unwrap().assignment.remove(&member);
    });
    Member { close, task }
}

/// Waits until the members' assignments have the sizes `sizes` (sorted), covering
/// every partition once.
async fn settle(group: &Shared, sizes: &[usize]) {
    timeout(LIMIT, async {
        loop {
            {
                let g = group.lock().unwrap();
                let mut got: Vec<usize> = g.assignment.values().map(Vec::len).collect();
                got.sort_unstable();
                let all: BTreeSet<&TopicPartition> = g.assignment.values().flatten().collect();
                if got == sizes && all.len() == PARTITIONS as usize {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the group settles on {sizes:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_split_rebalance_incrementally_and_leave_promptly() {
    let node = Node::start(&[
        "group.consumer.heartbeat.interval.ms=200",
        "group.consumer.min.heartbeat.interval.ms=100",
    ]);
    let mut admin = client(&node).await;
    admin
        .create_topic(&NewTopic {
            name: TOPIC.into(),
            partitions: PARTITIONS,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
    let group: Shared = Arc::default();

    // (a) Three members split six partitions, then read every record exactly once.
    let mut members: Vec<Member> = (0..3).map(|m| start_member(&node, m, &group)).collect();
    settle(&group, &[2, 2, 2]).await;
    let mut producer = Producer::new(client(&node).await, ProducerConfig::default());
    for partition in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let value = Bytes::from(format!("{partition}-{i}"));
            let record = ProduceRecord::new(None, Some(value));
            producer.send(TOPIC, Some(partition), record).await.unwrap();
        }
    }
    producer.flush().await.unwrap();
    let total = (PARTITIONS as usize) * (PER_PARTITION as usize);
    timeout(LIMIT, async {
        while group.lock().unwrap().handled.len() < total {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every record is read");
    {
        let g = group.lock().unwrap();
        let twice: Vec<_> = g.handled.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "handled more than once: {twice:?}");
        assert_eq!(g.handled.len(), total);
    }
    let described = admin.describe_group(GROUP).await.unwrap();
    assert_eq!(described.protocol_type, "consumer");
    assert_eq!(described.protocol, "uniform");
    let epochs = described
        .consumer
        .as_ref()
        .expect("a consumer-protocol group");
    assert!(epochs.group_epoch > 0);
    assert_eq!(described.members.len(), 3);
    for m in &described.members {
        assert!(m.consumer.as_ref().is_some_and(|c| c.member_epoch > 0));
    }
    let listed = admin.list_groups().await.unwrap();
    let listing = listed.iter().find(|l| l.group_id == GROUP).unwrap();
    assert_eq!(listing.group_type, "consumer");

    // (b) A fourth member moves only its share: the others revoke just what it gets.
    let before: BTreeMap<usize, usize> = {
        let g = group.lock().unwrap();
        (0..3).map(|m| (m, g.events[&m].len())).collect()
    };
    members.push(start_member(&node, 3, &group));
    settle(&group, &[1, 1, 2, 2]).await;
    {
        let g = group.lock().unwrap();
        let newcomer: BTreeSet<TopicPartition> = g.assignment[&3].iter().cloned().collect();
        let mut moved = 0;
        for m in 0..3 {
            let now: BTreeSet<&TopicPartition> = g.assignment[&m].iter().collect();
            for (kind, partitions) in &g.events[&m][before[&m]..] {
                assert_eq!(*kind, "revoked", "member {m} only gives up partitions");
                for tp in partitions {
                    assert!(
                        newcomer.contains(tp),
                        "member {m} revoked {tp:?}, not moved"
                    );
                    assert!(!now.contains(tp), "member {m} revoked {tp:?} it still owns");
                    moved += 1;
                }
            }
        }
        assert_eq!(moved, newcomer.len(), "only the newcomer's share moved");
    }

    // (c) A member that closes leaves at once: its partitions move long before the
    // session timeout (45 s).
    let closing = members.remove(0);
    let closed_at = Instant::now();
    closing.close.store(true, Ordering::Relaxed);
    timeout(LIMIT, closing.task).await.unwrap().unwrap();
    settle(&group, &[2, 2, 2]).await;
    let handover = closed_at.elapsed();
    assert!(handover < Duration::from_secs(10), "took {handover:?}");
    let described = admin.describe_group(GROUP).await.unwrap();
    assert_eq!(described.members.len(), 3);

    for m in members {
        m.close.store(true, Ordering::Relaxed);
        timeout(LIMIT, m.task).await.unwrap().unwrap();
    }
    let g = group.lock().unwrap();
    assert!(g.violations.is_empty(), "{:?}", g.violations);
}
