//! Partition leadership on a three-voter quorum with real TCP: AlterPartition,
//! elections when brokers are fenced, restart or shut down, ElectLeaders, automatic
//! rebalancing and reassignment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quorum_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorum_support::{endpoint, wait_until, Cluster, Tuning};
use tidelog_controller::quorum::{
    AlterPartition, ControllerClient, ControllerHandle, ElectionKind, MetadataQuorum, Reassignment,
};
use tidelog_controller::{CreateTopic, PartitionImage, Uuid};

const STEP: Duration = Duration::from_secs(10);

/// A topic with one partition per replica list.
fn assigned(name: &str, replicas: &[&[i32]]) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: (0..).zip(replicas.iter().map(|r| r.to_vec())).collect(),
        configs: vec![],
    }
}

fn state(cluster: &Cluster, node: i32, topic: &str, partition: i32) -> PartitionImage {
    cluster
        .node(node)
        .quorum
        .image()
        .topic(topic)
        .unwrap()
        .partitions[&partition]
        .clone()
}

fn epoch(cluster: &Cluster, node: i32, broker: i32) -> i64 {
    cluster
        .node(node)
        .quorum
        .image()
        .broker(broker)
        .unwrap()
        .epoch
}

/// The ISR change `leader` would ask for, against `node`'s current image.
fn isr_change(
    cluster: &Cluster,
    node: i32,
    topic: &str,
    leader: i32,
    isr: &[i32],
) -> AlterPartition {
    let image = cluster.node(node).quorum.image();
    let t = image.topic(topic).unwrap();
    let p = &t.partitions[&0];
    AlterPartition {
        broker_id: leader,
        broker_epoch: image.broker(leader).unwrap().epoch,
        topic_id: t.topic_id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr.to_vec(),
    }
}

/// Heartbeats every broker in its map every 100 ms through a `ControllerClient`
/// (which follows leader changes) until dropped.
struct Beats {
    epochs: Arc<Mutex<BTreeMap<i32, i64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Beats {
    fn start(cluster: &Cluster, node: i32, brokers: &[i32]) -> Beats {
        let epochs: BTreeMap<i32, i64> = brokers
            .iter()
            .map(|b| (*b, epoch(cluster, node, *b)))
            .collect();
        let epochs = Arc::new(Mutex::new(epochs));
        let client = ControllerClient::new(
            &cluster.peers,
            cluster.peers.derived_cluster_id(),
            Duration::from_secs(2),
        );
        let shared = Arc::clone(&epochs);
        let task = tokio::spawn(async move {
            loop {
                let now: Vec<(i32, i64)> = shared
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(b, e)| (*b, *e))
                    .collect();
                for (broker, epoch) in now {
                    let _ = client.broker_heartbeat(broker, epoch).await;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Beats { epochs, task }
    }

    fn stop(&self, broker: i32) {
        self.epochs.lock().unwrap().remove(&broker);
    }

    fn resume(&self, broker: i32, epoch: i64) {
        self.epochs.lock().unwrap().insert(broker, epoch);
    }
}

impl Drop for Beats {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_is_checked_by_epochs_and_applied_on_every_voter() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let follower = cluster.followers(leader)[0];
    let c = &cluster.node(follower).controller;
    c.create_topic(assigned("t", &[&[1, 2, 3]]), false)
        .await
        .unwrap();
    cluster.converged_on(leader, STEP).await;

    // Shrink through a follower voter (forwarded to the controller leader).
    let shrink = isr_change(&cluster, follower, "t", 1, &[1, 3]);
    let applied = c.alter_partition(shrink.clone()).await.unwrap();
    assert_eq!(applied.isr, vec![1, 3]);
    assert_eq!(
        (
            applied.leader,
            applied.leader_epoch,
            applied.partition_epoch
        ),
        (1, 0, 1)
    );
    cluster.converged_on(leader, STEP).await;
    for id in [1, 2, 3] {
        assert_eq!(state(&cluster, id, "t", 0), applied);
    }

    // The same request again is based on an old partition epoch.
    let stale = c.alter_partition(shrink.clone()).await.unwrap_err();
    assert_eq!(stale.error_code(), 108, "{stale}");
    let mut old_leader_epoch = isr_change(&cluster, follower, "t", 1, &[1]);
    old_leader_epoch.leader_epoch = -1;
    assert_eq!(
        c.alter_partition(old_leader_epoch)
            .await
            .unwrap_err()
            .error_code(),
        74
    );
    let mut old_broker_epoch = isr_change(&cluster, follower, "t", 1, &[1]);
    old_broker_epoch.broker_epoch -= 1;
    assert_eq!(
        c.alter_partition(old_broker_epoch)
            .await
            .unwrap_err()
            .error_code(),
        77
    );
    let not_leader = isr_change(&cluster, follower, "t", 2, &[2]);
    assert_eq!(
        c.alter_partition(not_leader)
            .await
            .unwrap_err()
            .error_code(),
        42
    );

    // Expand again from a broker-only node.
    let remote = ControllerHandle::Remote(Arc::new(ControllerClient::new(
        &cluster.peers,
        cluster.peers.derived_cluster_id(),
        STEP,
    )));
    let expand = isr_change(&cluster, follower, "t", 1, &[1, 3, 2]);
    let applied = remote.alter_partition(expand).await.unwrap();
    assert_eq!(
        (applied.isr.clone(), applied.partition_epoch),
        (vec![1, 3, 2], 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_leader_is_replaced_and_its_return_brings_offline_partitions_back() {
    let tuning = Tuning {
        session_timeout: Duration::from_millis(1500),
        ..Tuning::default()
    };
    let cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(STEP).await;
    let beats = Beats::start(&cluster, leader, &[1, 2, 3]);
    let c = &cluster.node(leader).controller;
    c.create_topic(assigned("three", &[&[1, 2, 3]]), false)
        .await
        .unwrap();
    c.create_topic(assigned("one", &[&[1]]), false)
        .await
        .unwrap();
    cluster.converged_on(leader, STEP).await;

    // Broker 1 goes silent: fenced, its leaderships move or go offline.
    let silent_since = Instant::now();
    beats.stop(1);
    let watcher = cluster.followers(leader)[0];
    wait_until(STEP, "broker 1 is fenced and replaced", || {
        let three = state(&cluster, watcher, "three", 0);
        let one = state(&cluster, watcher, "one", 0);
        three.leader == 2 && one.leader == -1
    })
    .await;
    assert!(silent_since.elapsed() >= Duration::from_millis(1300));
    let three = state(&cluster, watcher, "three", 0);
    assert_eq!((three.isr.clone(), three.leader_epoch), (vec![2, 3], 1));
    let one = state(&cluster, watcher, "one", 0);
    assert_eq!(one.isr, vec![1], "the last ISR member stays");
    assert!(
        cluster
            .node(watcher)
            .quorum
            .image()
            .broker(1)
            .unwrap()
            .fenced
    );

    // It heartbeats again: the offline partition it was in sync for is back.
    beats.resume(1, epoch(&cluster, leader, 1));
    wait_until(STEP, "broker 1 leads 'one' again", || {
        state(&cluster, watcher, "one", 0).leader == 1
    })
    .await;
    assert_eq!(state(&cluster, watcher, "one", 0).leader_epoch, 2);
    // It is not in sync for 'three' until that leader says so.
    let three = state(&cluster, watcher, "three", 0);
    assert_eq!((three.leader, three.isr.clone()), (2, vec![2, 3]));
    let asked = Some(vec![("three".to_owned(), 0)]);
    let results = c
        .elect_leaders(ElectionKind::Preferred, asked.clone())
        .await
        .unwrap();
    assert_eq!(results[0].1.as_ref().unwrap_err().error_code(), 80);

    cluster.converged_on(leader, STEP).await;
    let back = isr_change(&cluster, leader, "three", 2, &[2, 3, 1]);
    c.alter_partition(back).await.unwrap();
    let results = c
        .elect_leaders(ElectionKind::Preferred, asked.clone())
        .await
        .unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(state(&cluster, leader, "three", 0).leader, 1);
    let results = c
        .elect_leaders(ElectionKind::Preferred, asked)
        .await
        .unwrap();
    assert_eq!(results[0].1.as_ref().unwrap_err().error_code(), 84);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_broker_loses_its_leaderships_at_once_and_is_fenced_until_it_heartbeats() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let c = &cluster.node(leader).controller;
    c.create_topic(assigned("r", &[&[1, 2, 3]]), false)
        .await
        .unwrap();
    let old_epoch = epoch(&cluster, leader, 1);

    let new_epoch = c
        .register_broker(1, Uuid::from_u128(1001), endpoint(9001), None)
        .await
        .unwrap();
    assert!(new_epoch > old_epoch);
    let image = cluster.node(leader).quorum.image();
    assert!(image.broker(1).unwrap().fenced);
    let r = state(&cluster, leader, "r", 0);
    assert_eq!((r.leader, r.isr.clone()), (2, vec![2, 3]));

    let stale = c.broker_heartbeat(1, old_epoch).await.unwrap_err();
    assert_eq!(stale.error_code(), 77);
    assert!(!c.broker_heartbeat(1, new_epoch).await.unwrap().fenced);
    assert!(
        !cluster
            .node(leader)
            .quorum
            .image()
            .broker(1)
            .unwrap()
            .fenced
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_moves_leaderships_and_keeps_the_broker_out_of_isrs() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let c = &cluster.node(cluster.followers(leader)[0]).controller;
    c.create_topic(assigned("s", &[&[1, 2, 3], &[1, 3, 2]]), false)
        .await
        .unwrap();
    c.create_topic(assigned("solo", &[&[1]]), false)
        .await
        .unwrap();
    let e1 = epoch(&cluster, leader, 1);

    assert_eq!(
        c.controlled_shutdown(1, e1).await.unwrap(),
        1,
        "'solo' stays"
    );
    cluster.converged_on(leader, STEP).await;
    let s0 = state(&cluster, leader, "s", 0);
    let s1 = state(&cluster, leader, "s", 1);
    assert_eq!((s0.leader, s0.isr.clone()), (2, vec![2, 3]));
    assert_eq!((s1.leader, s1.isr.clone()), (3, vec![3, 2]));
    assert_eq!(state(&cluster, leader, "solo", 0).leader, 1);
    assert_eq!(c.controlled_shutdown(1, e1).await.unwrap(), 1);
    assert_eq!(
        c.controlled_shutdown(1, e1 - 1)
            .await
            .unwrap_err()
            .error_code(),
        77
    );

    let rejoin = isr_change(&cluster, leader, "s", 2, &[2, 3, 1]);
    let refused = c.alter_partition(rejoin).await.unwrap_err();
    assert_eq!(refused.error_code(), 107, "{refused}");

    // Broker 3 hands over everything: it is fenced at once, and its heartbeats do not
    // unfence it until it registers again.
    let e3 = epoch(&cluster, leader, 3);
    assert_eq!(c.controlled_shutdown(3, e3).await.unwrap(), 0);
    cluster.converged_on(leader, STEP).await;
    assert!(
        cluster
            .node(leader)
            .quorum
            .image()
            .broker(3)
            .unwrap()
            .fenced
    );
    let s1 = state(&cluster, leader, "s", 1);
    assert_eq!((s1.leader, s1.isr.clone()), (2, vec![2]));
    assert!(c.broker_heartbeat(3, e3).await.unwrap().fenced);
    let e3 = c
        .register_broker(3, Uuid::from_u128(3003), endpoint(9003), None)
        .await
        .unwrap();
    assert!(!c.broker_heartbeat(3, e3).await.unwrap().fenced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_partitions_take_an_out_of_sync_replica_only_when_unclean_election_is_allowed() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let c = &cluster.node(leader).controller;
    c.create_topic(assigned("clean", &[&[1, 2]]), false)
        .await
        .unwrap();
    c.create_topic(assigned("dirty", &[&[1, 2]]), false)
        .await
        .unwrap();
    c.create_topic(assigned("asked", &[&[1, 2]]), false)
        .await
        .unwrap();
    for topic in ["clean", "dirty", "asked"] {
        let shrink = isr_change(&cluster, leader, topic, 1, &[1]);
        c.alter_partition(shrink).await.unwrap();
    }
    c.alter_topic_configs(
        "dirty",
        vec![("unclean.leader.election.enable".into(), Some("true".into()))],
        false,
    )
    .await
    .unwrap();

    // Broker 1 restarts: with nobody else in sync, only 'dirty' takes broker 2.
    c.register_broker(1, Uuid::from_u128(2001), endpoint(9001), None)
        .await
        .unwrap();
    let dirty = state(&cluster, leader, "dirty", 0);
    assert_eq!((dirty.leader, dirty.isr.clone()), (2, vec![2]));
    for topic in ["clean", "asked"] {
        let p = state(&cluster, leader, topic, 0);
        assert_eq!((p.leader, p.isr.clone()), (-1, vec![1]), "{topic}");
    }
    // An explicit unclean election elects where asked.
    let results = c
        .elect_leaders(ElectionKind::Unclean, Some(vec![("asked".into(), 0)]))
        .await
        .unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(state(&cluster, leader, "asked", 0).leader, 2);
    assert_eq!(state(&cluster, leader, "clean", 0).leader, -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_goes_back_to_preferred_replicas_automatically() {
    let tuning = Tuning {
        auto_rebalance_interval: Some(Duration::from_millis(200)),
        ..Tuning::default()
    };
    let cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(STEP).await;
    let c = &cluster.node(leader).controller;
    c.create_topic(assigned("b", &[&[1, 2, 3]]), false)
        .await
        .unwrap();
    let e1 = c
        .register_broker(1, Uuid::from_u128(3001), endpoint(9001), None)
        .await
        .unwrap();
    assert_eq!(state(&cluster, leader, "b", 0).leader, 2);
    c.broker_heartbeat(1, e1).await.unwrap();
    // Not in sync: it must not lead yet.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(state(&cluster, leader, "b", 0).leader, 2);

    let back = isr_change(&cluster, leader, "b", 2, &[2, 3, 1]);
    c.alter_partition(back).await.unwrap();
    wait_until(STEP, "broker 1 leads again", || {
        state(&cluster, leader, "b", 0).leader == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reassignment_onto_a_new_broker_completes_when_it_joins_the_isr() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let follower = cluster.followers(leader)[0];
    let c = &cluster.node(follower).controller;
    c.register_broker(4, Uuid::from_u128(4), endpoint(9004), None)
        .await
        .unwrap();
    c.create_topic(assigned("m", &[&[1, 2, 3]]), false)
        .await
        .unwrap();

    let results = c
        .alter_reassignments(vec![("m".into(), 0, Some(vec![2, 3, 4]))])
        .await
        .unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    let listed = c.list_reassignments(None).await.unwrap();
    assert_eq!(
        listed,
        vec![Reassignment {
            topic: "m".into(),
            partition: 0,
            replicas: vec![2, 3, 4, 1],
            adding: vec![4],
            removing: vec![1],
        }]
    );
    cluster.converged_on(leader, STEP).await;
    let caught_up = isr_change(&cluster, follower, "m", 1, &[1, 2, 3, 4]);
    let done = c.alter_partition(caught_up).await.unwrap();
    assert_eq!(
        (done.replicas.clone(), done.isr.clone(), done.leader),
        (vec![2, 3, 4], vec![2, 3, 4], 2)
    );
    assert!(done.adding_replicas.is_empty() && done.removing_replicas.is_empty());
    assert!(c.list_reassignments(None).await.unwrap().is_empty());
    let cancel = c
        .alter_reassignments(vec![("m".into(), 0, None)])
        .await
        .unwrap();
    assert_eq!(cancel[0].1.as_ref().unwrap_err().error_code(), 85);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_controller_leader_still_fences_a_silent_broker_and_re_elects() {
    let tuning = Tuning {
        session_timeout: Duration::from_millis(1500),
        ..Tuning::default()
    };
    let mut cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(STEP).await;
    let beats = Beats::start(&cluster, leader, &[1, 2, 3]);
    cluster
        .node(leader)
        .controller
        .create_topic(assigned("f", &[&[1, 2, 3]]), false)
        .await
        .unwrap();
    cluster.converged_on(leader, STEP).await;

    // The controller leader dies and broker 1 goes silent at the same time.
    beats.stop(1);
    cluster.kill(leader).await;
    let new_leader = cluster.leader(STEP).await;
    assert_ne!(new_leader, leader);
    wait_until(
        Duration::from_secs(15),
        "broker 1 is fenced by the new leader",
        || {
            let p = state(&cluster, new_leader, "f", 0);
            p.leader == 2 && p.isr == [2, 3]
        },
    )
    .await;
    let image = cluster.node(new_leader).quorum.image();
    assert!(image.broker(1).unwrap().fenced);
    assert!(!image.broker(2).unwrap().fenced && !image.broker(3).unwrap().fenced);
}
