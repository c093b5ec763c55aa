//! The Raft controller quorum with real TCP between in-process voters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quorum_support;

use std::time::{Duration, Instant};

use quorum_support::{endpoint, topic, within, Cluster, Tuning};
use tidelog_controller::quorum::{
    BrokerTraffic, CommittedEvent, MetadataQuorum, QuorumError, QuorumRole, RequestError,
};
use tidelog_controller::{MetadataRecord, Uuid};

const ELECTION: Duration = Duration::from_secs(5);
const CONVERGE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_a_leader_and_replicate_records_to_every_image() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(ELECTION).await;
    let follower = cluster.followers(leader)[0];
    // Subscribe once the follower applied the registrations, so the next event is ours.
    cluster.converged_on(leader, CONVERGE).await;
    let mut events = cluster.node(follower).quorum.subscribe();

    let records = vec![
        MetadataRecord::Topic {
            name: "raw".into(),
            topic_id: Uuid::from_u128(42),
        },
        MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(42),
        },
    ];
    let committed = cluster
        .node(leader)
        .quorum
        .propose(records.clone())
        .await
        .unwrap();
    // Three broker registrations came first.
    assert_eq!(committed.first_offset, Some(3));
    assert_eq!(committed.last_offset, Some(4));

    // A follower sees the same batch with the same offsets.
    let event = within(CONVERGE, "the follower's committed event", events.recv())
        .await
        .unwrap();
    match event {
        CommittedEvent::Records {
            first_offset,
            records: got,
        } => {
            assert_eq!(first_offset, 3);
            assert_eq!(&got[..], &records[..]);
        }
        other => panic!("{other:?}"),
    }

    // Requests made on a follower are forwarded to the leader.
    let created = cluster
        .node(follower)
        .controller
        .create_topic(topic("orders"), false)
        .await
        .unwrap();
    assert_eq!(created.partitions.len(), 2);
    cluster.converged_on(leader, CONVERGE).await;
    for node in cluster.nodes.values() {
        let image = node.quorum.image();
        assert!(image.topic("orders").is_some());
        assert!(image.topic("raw").is_none());
        // registrations 0..=2, the raw batch 3..=4, the topic and its 2 partitions 5..=7
        assert_eq!(image.last_offset(), Some(7));
        assert_eq!(image.brokers().count(), 3);
    }

    // A refusal made on the leader reaches the follower's caller with its Kafka code.
    let again = cluster
        .node(follower)
        .controller
        .create_topic(topic("orders"), false)
        .await
        .unwrap_err();
    assert_eq!(again.error_code(), 36, "{again}");

    // A follower cannot propose by itself.
    match cluster.node(follower).quorum.propose(records).await {
        Err(QuorumError::NotController { leader: Some(l) }) => assert_eq!(l, leader),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_quorum_shows_leader_voters_and_lag() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(ELECTION).await;
    let follower = cluster.followers(leader)[0];
    cluster
        .node(leader)
        .controller
        .create_topic(topic("t"), false)
        .await
        .unwrap();
    // Asked on a follower, answered by the leader.
    let mut status = None;
    let deadline = Instant::now() + CONVERGE;
    while Instant::now() < deadline {
        let s = cluster
            .node(follower)
            .controller
            .describe_quorum()
            .await
            .unwrap();
        if s.voters.iter().all(|v| v.lag == Some(0)) {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = status.expect("all voters at lag 0 within the timeout");
    assert_eq!(status.node_id, leader);
    assert_eq!(status.role, QuorumRole::Leader);
    assert_eq!(status.leader, Some(leader));
    let ids: Vec<i32> = status.voters.iter().map(|v| v.node_id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    for voter in &status.voters {
        assert_eq!(voter.log_end, Some(status.log_end));
        assert_eq!(voter.address, cluster.addrs[&voter.node_id].to_string());
    }
    // A follower's own view: it knows the leader, not the others' progress.
    let local = cluster.node(follower).quorum.status();
    assert_eq!(local.role, QuorumRole::Follower);
    assert_eq!(local.leader, Some(leader));
    assert!(local
        .voters
        .iter()
        .filter(|v| v.node_id != follower)
        .all(|v| v.lag.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_elects_another_and_keeps_every_record() {
    let mut cluster = Cluster::start(3, Tuning::default()).await;
    let old_leader = cluster.leader(ELECTION).await;
    for name in ["a", "b", "c"] {
        cluster
            .node(old_leader)
            .controller
            .create_topic(topic(name), false)
            .await
            .unwrap();
    }
    let before = cluster.node(old_leader).quorum.image();

    cluster.kill(old_leader).await;
    let killed_at = Instant::now();
    let new_leader = cluster.leader(ELECTION).await;
    let took = killed_at.elapsed();
    assert_ne!(new_leader, old_leader);
    assert!(took < ELECTION, "election took {took:?}");

    // Every earlier record is there, and the quorum accepts writes again.
    let image = cluster.node(new_leader).quorum.image();
    assert_eq!(*image, *before);
    let survivor = cluster.followers(new_leader)[0];
    cluster
        .node(survivor)
        .controller
        .create_topic(topic("d"), false)
        .await
        .unwrap();

    // The old leader returns as a follower and catches up.
    cluster.restart(old_leader).await;
    cluster.converged_on(new_leader, CONVERGE).await;
    let image = cluster.node(old_leader).quorum.image();
    for name in ["a", "b", "c", "d"] {
        assert!(image.topic(name).is_some(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_of_three_down_writes_time_out_and_resume_when_one_returns() {
    let tuning = Tuning {
        write_timeout: Duration::from_millis(1500),
        ..Tuning::default()
    };
    let mut cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(ELECTION).await;
    cluster
        .node(leader)
        .controller
        .create_topic(topic("before"), false)
        .await
        .unwrap();
    let followers = cluster.followers(leader);
    for id in &followers {
        cluster.kill(*id).await;
    }

    let started = Instant::now();
    let err = cluster
        .node(leader)
        .controller
        .create_topic(topic("during"), false)
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "failed only after {waited:?}"
    );
    assert_eq!(err.error_code(), 7, "REQUEST_TIMED_OUT expected, got {err}");
    assert!(
        matches!(err, RequestError::Quorum(QuorumError::Timeout(_))),
        "{err:?}"
    );
    // A raw proposal also fails clearly (time out), never hangs.
    let raw = cluster
        .node(leader)
        .quorum
        .propose(vec![MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(9),
        }])
        .await;
    assert!(
        matches!(
            raw,
            Err(QuorumError::Timeout(_) | QuorumError::NotController { .. })
        ),
        "{raw:?}"
    );

    cluster.restart(followers[0]).await;
    let leader = cluster.leader(ELECTION).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cluster
            .node(leader)
            .controller
            .create_topic(topic("after"), false)
            .await
        {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "still failing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    cluster.converged_on(leader, CONVERGE).await;
    let image = cluster.node(followers[0]).quorum.image();
    assert!(image.topic("before").is_some());
    assert!(image.topic("after").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_voter_restarts_from_disk_with_the_same_image() {
    let mut cluster = Cluster::start(1, Tuning::default()).await;
    cluster.leader(ELECTION).await;
    let node = cluster.node(1);
    let epoch = node
        .controller
        .register_broker(1, Uuid::from_u128(5), endpoint(9092), Some("r1".into()))
        .await
        .unwrap();
    // A new incarnation of a registered broker is a restarted process: fenced until
    // its first heartbeat.
    assert!(node.quorum.image().broker(1).unwrap().fenced);
    let reply = node.controller.broker_heartbeat(1, epoch).await.unwrap();
    assert!(!reply.fenced);
    for name in ["x", "y"] {
        node.controller
            .create_topic(topic(name), false)
            .await
            .unwrap();
    }
    node.controller
        .alter_topic_configs(
            "x",
            vec![("retention.ms".into(), Some("1000".into()))],
            false,
        )
        .await
        .unwrap();
    let ids = node
        .controller
        .allocate_producer_ids(1, epoch)
        .await
        .unwrap();
    assert_eq!(ids, 0..1000);
    let before = node.quorum.image();
    assert_eq!(before.topic("x").unwrap().partitions.len(), 2);

    cluster.kill(1).await;
    cluster.restart(1).await;
    // The committed records are applied from the local log before any election.
    quorum_support::wait_until(CONVERGE, "the image is rebuilt", || {
        *cluster.node(1).quorum.image() == *before
    })
    .await;
    cluster.leader(ELECTION).await;
    let ids = cluster
        .node(1)
        .controller
        .allocate_producer_ids(1, epoch)
        .await
        .unwrap();
    assert_eq!(ids, 1000..2000, "a restart never hands out ids twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_of_the_raft_log_is_cut_at_restart() {
    let mut cluster = Cluster::start(1, Tuning::default()).await;
    cluster.leader(ELECTION).await;
    cluster
        .node(1)
        .controller
        .create_topic(topic("kept"), false)
        .await
        .unwrap();
    let before = cluster.node(1).quorum.image();
    cluster.kill(1).await;
    let log = cluster.dir(1).join("raft.log");
    let clean_len = std::fs::metadata(&log).unwrap().len();
    // Half a frame, as a crash in the middle of an append leaves it.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 200, 1, 2, 3, 4, 1, b'{']);
    std::fs::write(&log, &bytes).unwrap();

    cluster.restart(1).await;
    quorum_support::wait_until(CONVERGE, "the image is rebuilt", || {
        *cluster.node(1).quorum.image() == *before
    })
    .await;
    cluster.leader(ELECTION).await;
    cluster
        .node(1)
        .controller
        .create_topic(topic("next"), false)
        .await
        .unwrap();
    assert!(std::fs::metadata(&log).unwrap().len() > clean_len);
    cluster.kill(1).await;
    cluster.restart(1).await;
    quorum_support::wait_until(CONVERGE, "both topics after a second restart", || {
        let image = cluster.node(1).quorum.image();
        image.topic("kept").is_some() && image.topic("next").is_some()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_voter_catches_up_from_a_snapshot() {
    let tuning = Tuning {
        snapshot_every_entries: 5,
        entries_kept_after_snapshot: 0,
        ..Tuning::default()
    };
    let mut cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(ELECTION).await;
    let lagging = cluster.followers(leader)[0];
    cluster.kill(lagging).await;
    for i in 0..30 {
        cluster
            .node(leader)
            .controller
            .create_topic(topic(&format!("t{i}")), false)
            .await
            .unwrap();
    }
    // The leader compacted its log past everything the lagging voter has.
    quorum_support::wait_until(CONVERGE, "the leader took a snapshot", || {
        cluster.node(leader).quorum.status().snapshot_end > 20
    })
    .await;

    cluster.restart(lagging).await;
    let leader = cluster.leader(ELECTION).await;
    cluster.converged_on(leader, CONVERGE).await;
    let status = cluster.node(lagging).quorum.status();
    assert!(status.snapshots_installed >= 1, "{status:?}");
    let image = cluster.node(lagging).quorum.image();
    assert_eq!(image.topic_count(), 30);

    // It keeps following with ordinary records afterwards.
    cluster
        .node(lagging)
        .controller
        .create_topic(topic("later"), false)
        .await
        .unwrap();
    cluster.converged_on(leader, CONVERGE).await;
    assert!(cluster
        .node(lagging)
        .quorum
        .image()
        .topic("later")
        .is_some());

    // And its snapshot survives its own restart.
    cluster.kill(lagging).await;
    cluster.restart(lagging).await;
    cluster.converged_on(leader, CONVERGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_brokers_are_fenced_and_a_heartbeat_unfences_them() {
    let tuning = Tuning {
        session_timeout: Duration::from_millis(400),
        register_brokers: false,
        ..Tuning::default()
    };
    let cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader(ELECTION).await;
    let follower = cluster.followers(leader)[0];
    let c = &cluster.node(follower).controller;
    let e1 = c
        .register_broker(1, Uuid::from_u128(1), endpoint(9001), None)
        .await
        .unwrap();
    let e2 = c
        .register_broker(2, Uuid::from_u128(2), endpoint(9002), None)
        .await
        .unwrap();
    assert!(e2 > e1, "broker epochs grow: {e1} then {e2}");

    // Broker 1 heartbeats (through a follower), broker 2 stays silent.
    let started = Instant::now();
    loop {
        let reply = c.broker_heartbeat(1, e1).await.unwrap();
        assert!(!reply.fenced);
        let image = cluster.node(follower).quorum.image();
        if image.broker(2).is_some_and(|b| b.fenced) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "broker 2 was never fenced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300),
        "fenced after only {elapsed:?}"
    );
    let image = cluster.node(follower).quorum.image();
    assert!(!image.broker(1).unwrap().fenced);
    assert_eq!(image.live_broker_ids(), vec![1]);

    // Its next heartbeat brings it back.
    let reply = c.broker_heartbeat(2, e2).await.unwrap();
    assert!(!reply.fenced);
    cluster.converged_on(leader, CONVERGE).await;
    assert!(
        !cluster
            .node(follower)
            .quorum
            .image()
            .broker(2)
            .unwrap()
            .fenced
    );

    // Heartbeats carry traffic counters; every reply has each broker's latest.
    let traffic = |n: u64| BrokerTraffic {
        bytes_in: n,
        bytes_out: 2 * n,
        sampled_at_ms: 1_000 + i64::try_from(n).unwrap(),
    };
    c.broker_heartbeat_with_traffic(2, e2, traffic(5))
        .await
        .unwrap();
    c.broker_heartbeat_with_traffic(2, e2, traffic(7))
        .await
        .unwrap();
    let reply = c
        .broker_heartbeat_with_traffic(1, e1, traffic(3))
        .await
        .unwrap();
    assert_eq!(reply.traffic.get(&1), Some(&traffic(3)));
    assert_eq!(reply.traffic.get(&2), Some(&traffic(7)), "the latest");
    // A heartbeat without figures keeps the broker's last ones.
    let reply = c.broker_heartbeat(1, e1).await.unwrap();
    assert_eq!(reply.traffic.len(), 2);

    // Wrong epochs and unknown brokers are refused with Kafka's codes.
    let stale = c.broker_heartbeat(2, e2 - 1).await.unwrap_err();
    assert_eq!(stale.error_code(), 77, "{stale}");
    let unknown = c.broker_heartbeat(9, 0).await.unwrap_err();
    assert_eq!(unknown.error_code(), 102, "{unknown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_restarted_alone_rebuilds_its_image_from_disk() {
    let mut cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(ELECTION).await;
    for name in ["p", "q"] {
        cluster
            .node(leader)
            .controller
            .create_topic(topic(name), false)
            .await
            .unwrap();
    }
    cluster.converged_on(leader, CONVERGE).await;
    let before = cluster.node(leader).quorum.image();
    for id in [1, 2, 3] {
        cluster.kill(id).await;
    }

    // Alone it can elect no leader, yet its image is back from its own files.
    cluster.restart(2).await;
    quorum_support::wait_until(CONVERGE, "node 2 rebuilt its image", || {
        *cluster.node(2).quorum.image() == *before
    })
    .await;
    // It may even resume as leader of its old term (its vote says a majority granted
    // it), but without a majority it commits nothing.
    let alone = cluster
        .node(2)
        .controller
        .create_topic(topic("alone"), false)
        .await
        .unwrap_err();
    assert!(matches!(alone.error_code(), 7 | 41), "{alone}");
    assert!(cluster.node(2).quorum.image().topic("alone").is_none());

    cluster.restart(1).await;
    cluster.restart(3).await;
    let leader = cluster.leader(ELECTION).await;
    cluster
        .node(leader)
        .controller
        .create_topic(topic("r"), false)
        .await
        .unwrap();
    cluster.converged_on(leader, CONVERGE).await;
    let image = cluster.node(2).quorum.image();
    for name in ["p", "q", "r"] {
        assert!(image.topic(name).is_some(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_survive_losing_two_including_a_dropped_leader() {
    let mut cluster = Cluster::start(5, Tuning::default()).await;
    let leader = cluster.leader(ELECTION).await;
    cluster
        .node(leader)
        .controller
        .create_topic(topic("five"), false)
        .await
        .unwrap();
    // The leader is dropped without a shutdown call (its Drop must stop it), and one
    // follower is shut down.
    let follower = cluster.followers(leader)[0];
    drop(cluster.nodes.remove(&leader));
    cluster.kill(follower).await;

    let new_leader = cluster.leader(ELECTION).await;
    assert_ne!(new_leader, leader);
    let asker = cluster.followers(new_leader)[0];
    cluster
        .node(asker)
        .controller
        .create_topic(topic("six"), false)
        .await
        .unwrap();
    cluster.converged_on(new_leader, CONVERGE).await;
    for node in cluster.nodes.values() {
        let image = node.quorum.image();
        assert!(image.topic("five").is_some() && image.topic("six").is_some());
    }
    let status = cluster
        .node(asker)
        .controller
        .describe_quorum()
        .await
        .unwrap();
    assert_eq!(status.voters.len(), 5);
    let down: Vec<i32> = status
        .voters
        .iter()
        .filter(|v| v.log_end < Some(status.log_end))
        .map(|v| v.node_id)
        .collect();
    let mut expected = vec![leader, follower];
    expected.sort_unstable();
    assert_eq!(down, expected, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_without_a_reachable_leader_answers_not_controller() {
    let mut cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(ELECTION).await;
    let followers = cluster.followers(leader);
    cluster.kill(leader).await;
    cluster.kill(followers[0]).await;
    let lone = followers[1];
    let started = Instant::now();
    let err = cluster
        .node(lone)
        .controller
        .create_topic(topic("nobody-leads"), false)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.error_code(), 41, "NOT_CONTROLLER expected, got {err}");
    // Past an election timeout it campaigns without a majority: still NOT_CONTROLLER,
    // answered promptly.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let started = Instant::now();
    let err = cluster
        .node(lone)
        .controller
        .delete_topic("nobody-leads")
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), 41, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
