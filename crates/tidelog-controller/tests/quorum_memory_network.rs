//! The controller quorum on the in-memory network, in one process: a leader cut off
//! from the others loses the quorum while the majority elects another and goes on;
//! after the partition heals every voter converges on the majority's records. Broker
//! sessions are timed on the controllers' clock, which a test moves by hand.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quorum_support;

use std::sync::Arc;
use std::time::Duration;

use quorum_support::{endpoint, host, topic, wait_until, Cluster, Tuning};
use tidelog_controller::quorum::{MetadataQuorum, QuorumRole};
use tidelog_controller::Uuid;
use tidelog_env::clock::ManualClock;

const ELECTION: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_loses_the_quorum_and_the_majority_goes_on() {
    let tuning = Tuning {
        write_timeout: Duration::from_millis(1500),
        ..Tuning::default()
    };
    let cluster = Cluster::start_in_memory(3, tuning).await;
    let network = cluster.network.clone().unwrap();
    let old = cluster.leader(ELECTION).await;
    cluster
        .node(old)
        .controller
        .create_topic(topic("before"), false)
        .await
        .unwrap();

    network.isolate(host(old));
    let majority = cluster.followers(old);
    let mut new = None;
    wait_until(ELECTION, "the majority elects a leader of its own", || {
        let status = cluster.node(majority[0]).quorum.status();
        new = status
            .leader
            .filter(|l| *l != old && status.role != QuorumRole::Candidate);
        new.is_some_and(|l| cluster.node(l).quorum.status().role == QuorumRole::Leader)
    })
    .await;
    let new = new.unwrap();
    assert!(majority.contains(&new));
    cluster
        .node(new)
        .controller
        .create_topic(topic("during"), false)
        .await
        .unwrap();
    // The cut-off voter can commit nothing: its writes end in an error, not in its image.
    let refused = cluster
        .node(old)
        .controller
        .create_topic(topic("lost"), false)
        .await;
    assert!(refused.is_err(), "an isolated voter committed a write");
    assert!(cluster.node(old).quorum.image().topic("during").is_none());

    network.heal_all();
    cluster.converged_on(new, ELECTION).await;
    let image = cluster.node(old).quorum.image();
    assert!(image.topic("before").is_some() && image.topic("during").is_some());
    assert!(image.topic("lost").is_none());
    assert_eq!(cluster.leader(ELECTION).await, new);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_sessions_expire_on_the_controllers_clock() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let tuning = Tuning {
        // Far longer than the test runs: only the manual clock can expire it.
        session_timeout: Duration::from_secs(3600),
        register_brokers: false,
        clock: clock.clone(),
        ..Tuning::default()
    };
    let cluster = Cluster::start_in_memory(3, tuning).await;
    let leader = cluster.leader(ELECTION).await;
    let controller = &cluster.node(leader).controller;
    let e1 = controller
        .register_broker(1, Uuid::from_u128(1), endpoint(9001), None)
        .await
        .unwrap();
    let e2 = controller
        .register_broker(2, Uuid::from_u128(2), endpoint(9002), None)
        .await
        .unwrap();
    assert!(!controller.broker_heartbeat(1, e1).await.unwrap().fenced);
    assert!(!controller.broker_heartbeat(2, e2).await.unwrap().fenced);

    // Real time passes, the controllers' clock does not: nobody is fenced.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        cluster.node(leader).quorum.image().live_broker_ids(),
        vec![1, 2]
    );

    // An hour passes on the clock; broker 1 heartbeats, broker 2 stays silent.
    clock.advance(Duration::from_secs(3000));
    assert!(!controller.broker_heartbeat(1, e1).await.unwrap().fenced);
    clock.advance(Duration::from_secs(601));
    wait_until(ELECTION, "the silent broker is fenced", || {
        let image = cluster.node(leader).quorum.image();
        image.broker(2).is_some_and(|b| b.fenced)
    })
    .await;
    assert_eq!(
        cluster.node(leader).quorum.image().live_broker_ids(),
        vec![1]
    );
}
