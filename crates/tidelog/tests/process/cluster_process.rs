//! A three-node cluster of real `tidelog serve --quorum ...` processes: the voters
//! elect a controller, every broker registers and appears in Metadata, topics are
//! placed across the brokers, and metadata changes need a majority of the voters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::cluster::Cluster;
use support::cluster_calls::{
    broker_ids, commit_offset, create, eventually, fetch_offset, find_coordinator, java_hash,
    metadata, partitions,
};
use support::Conn;

const INVALID_REPLICATION_FACTOR: i16 = 38;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_CONTROLLER: i16 = 41;

/// Short sessions so a killed node is fenced within seconds.
const SETTINGS: &[&str] = &[
    "broker.session.timeout.ms=2000",
    "broker.heartbeat.interval.ms=300",
    "offsets.topic.num.partitions=3",
    "default.replication.factor=3",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_place_replicas_and_need_a_majority_for_changes() {
    let mut cluster = Cluster::start(3, SETTINGS, Duration::from_secs(60));
    let all: BTreeSet<i32> = [1, 2, 3].into();

    // Every node lists the three brokers and names one of them as the controller.
    for node in [1, 2, 3] {
        let addr = cluster.node(node).kafka;
        let all = &all;
        let m = eventually(
            "three brokers and a controller",
            Duration::from_secs(20),
            || async move {
                let m = metadata(addr).await;
                (broker_ids(&m) == *all && (1..=3).contains(&m.controller_id.0)).then_some(m)
            },
        )
        .await;
        assert_eq!(m.cluster_id.as_ref().map(|c| c.len()), Some(22));
    }

    // RF 3: every partition on all three brokers, led by one of them.
    let n1 = cluster.node(1).kafka;
    assert_eq!(create(n1, "rf3", 3, 3).await.0, 0);
    for node in [1, 2, 3] {
        let addr = cluster.node(node).kafka;
        let parts = eventually(
            "rf3 visible everywhere",
            Duration::from_secs(10),
            || async move { partitions(&metadata(addr).await, "rf3") },
        )
        .await;
        assert_eq!(parts.len(), 3);
        for (leader, replicas) in &parts {
            assert_eq!(replicas.iter().copied().collect::<BTreeSet<_>>(), all);
            assert_eq!(replicas.len(), 3);
            assert!(all.contains(leader), "leader {leader}");
        }
        // Leadership is spread: three partitions, three different preferred leaders.
        let leaders: BTreeSet<i32> = parts.iter().map(|(l, _)| *l).collect();
        assert_eq!(leaders.len(), 3, "{parts:?}");
    }

    // The group coordinator is the leader of the group's __consumer_offsets partition
    // (created on first use through the quorum, replicated on the three brokers), and
    // it takes and serves offsets for the group.
    let group = "cluster-group";
    let (coordinator, port) = eventually(
        "a group coordinator",
        Duration::from_secs(20),
        || async move { find_coordinator(n1, group).await },
    )
    .await;
    let offsets_partition = (java_hash(group) & 0x7fff_ffff) % 3;
    let parts = partitions(&metadata(n1).await, "__consumer_offsets").expect("__consumer_offsets");
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[offsets_partition as usize].0, coordinator);
    assert_eq!(parts[offsets_partition as usize].1.len(), 3);
    let coordinator_addr = cluster.node(coordinator).kafka;
    assert_eq!(i32::from(coordinator_addr.port()), port);
    eventually(
        "offset committed on the coordinator",
        Duration::from_secs(20),
        || async move { (commit_offset(coordinator_addr, group, 42).await == 0).then_some(()) },
    )
    .await;
    assert_eq!(fetch_offset(coordinator_addr, group).await, (0, 42));
    // Any other node points the client at the coordinator.
    let other = cluster.node(if coordinator == 1 { 2 } else { 1 }).kafka;
    assert_eq!(
        find_coordinator(other, group).await,
        Some((coordinator, port))
    );

    // One more replica than brokers is refused, with a message.
    let (code, message) = create(n1, "rf4", 1, 4).await;
    assert_eq!(code, INVALID_REPLICATION_FACTOR);
    assert!(message.unwrap_or_default().contains('3'));

    // SIGTERM: the node hands its leaderships over before it exits, so the others
    // show new leaders at once, without waiting for its session to time out.
    assert!(
        cluster.stop(3, Duration::from_secs(40)),
        "node 3 exited cleanly"
    );
    let stopped = Instant::now();
    let moved = eventually(
        "leaderships moved off node 3",
        Duration::from_secs(20),
        || async move {
            let parts = partitions(&metadata(n1).await, "rf3")?;
            parts
                .iter()
                .all(|(leader, _)| [1, 2].contains(leader))
                .then_some(())
        },
    );
    moved.await;
    assert!(
        stopped.elapsed() < Duration::from_millis(1500),
        "leaders moved only {:?} after the exit (the session timeout, not the handover?)",
        stopped.elapsed()
    );
    cluster.restart(3, Duration::from_secs(60));
    let back = eventually(
        "node 3 back in Metadata",
        Duration::from_secs(20),
        || async move { (broker_ids(&metadata(n1).await) == BTreeSet::from([1, 2, 3])).then_some(()) },
    );
    back.await;

    // One voter (and broker) down: a majority remains, topics can still be created and
    // are placed on the live brokers once the dead one is fenced.
    cluster.kill9(3);
    let fenced = eventually("node 3 fenced", Duration::from_secs(20), || async move {
        (broker_ids(&metadata(n1).await) == BTreeSet::from([1, 2])).then_some(())
    });
    fenced.await;
    // DescribeCluster v2 lists the fenced broker too when asked, flagged; v1 does not.
    let mut conn = Conn::connect(n1).await;
    let described: DescribeClusterResponse = conn
        .call(
            ApiKey::DescribeCluster,
            2,
            &DescribeClusterRequest::default().with_include_fenced_brokers(true),
        )
        .await;
    let flagged: Vec<(i32, bool)> = described
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.is_fenced))
        .collect();
    assert_eq!(flagged, vec![(1, false), (2, false), (3, true)]);
    let described: DescribeClusterResponse = conn
        .call(
            ApiKey::DescribeCluster,
            1,
            &DescribeClusterRequest::default(),
        )
        .await;
    assert_eq!(described.brokers.len(), 2);
    assert!((1..=2).contains(&described.controller_id.0));
    let created = eventually(
        "create with one node down",
        Duration::from_secs(20),
        || async move {
            let (code, message) = create(n1, "after-one-down", 2, 2).await;
            match code {
                0 => Some(()),
                // A new controller leader may still be taking over.
                REQUEST_TIMED_OUT | NOT_CONTROLLER => None,
                other => panic!("create failed: {other} {message:?}"),
            }
        },
    );
    created.await;
    let n2 = cluster.node(2).kafka;
    let parts = eventually(
        "after-one-down on node 2",
        Duration::from_secs(10),
        || async move { partitions(&metadata(n2).await, "after-one-down") },
    )
    .await;
    for (leader, replicas) in &parts {
        assert_eq!(
            replicas.iter().copied().collect::<BTreeSet<_>>(),
            BTreeSet::from([1, 2])
        );
        assert!([1, 2].contains(leader));
    }

    // Auto-creation by Metadata caps default.replication.factor (3) by the live brokers.
    let mut conn = Conn::connect(n1).await;
    let auto: MetadataResponse = conn
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                    TopicName(StrBytes::from_static_str("auto-one-down")),
                ))]))
                .with_allow_auto_topic_creation(true),
        )
        .await;
    assert_eq!(auto.topics[0].error_code, 0);
    for (_, replicas) in partitions(&auto, "auto-one-down").expect("auto-created") {
        assert_eq!(
            replicas.into_iter().collect::<BTreeSet<_>>(),
            BTreeSet::from([1, 2])
        );
    }

    // Two of three voters down: no majority. A change fails with a clear error in
    // bounded time, and the survivor still answers Metadata.
    cluster.kill9(2);
    let started = Instant::now();
    let (code, message) = create(n1, "no-majority", 1, 1).await;
    let took = started.elapsed();
    assert!(
        code == REQUEST_TIMED_OUT || code == NOT_CONTROLLER,
        "code {code} {message:?}"
    );
    let message = message.expect("an error message");
    assert!(
        message.contains("quorum") || message.contains("controller"),
        "{message}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let m = tokio::time::timeout(Duration::from_secs(5), metadata(n1))
        .await
        .expect("Metadata answered");
    assert!(partitions(&m, "rf3").is_some());
    assert!(partitions(&m, "no-majority").is_none());
    assert!(cluster.is_running(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_coordinator_moves_with_partition_leadership() {
    let mut cluster = Cluster::start(3, SETTINGS, Duration::from_secs(60));
    let n1 = cluster.node(1).kafka;
    let created = eventually("rf3 created", Duration::from_secs(20), || async move {
        (create(n1, "rf3", 1, 3).await.0 == 0).then_some(())
    });
    created.await;
    // Any FindCoordinator creates __consumer_offsets; then pick a group whose partition
    // node 1 does not lead, so node 1 survives the coordinator's death.
    eventually(
        "__consumer_offsets",
        Duration::from_secs(20),
        || async move { find_coordinator(n1, "probe").await },
    )
    .await;
    let parts = eventually(
        "__consumer_offsets listed",
        Duration::from_secs(10),
        || async move { partitions(&metadata(n1).await, "__consumer_offsets") },
    )
    .await;
    let group = (0..100)
        .map(|i| format!("group-{i}"))
        .find(|g| parts[((java_hash(g) & 0x7fff_ffff) % 3) as usize].0 != 1)
        .expect("a group led elsewhere");
    let group = group.as_str();
    let (old, _) = eventually("the coordinator", Duration::from_secs(20), || async move {
        find_coordinator(n1, group).await
    })
    .await;
    assert_ne!(old, 1);
    let old_addr = cluster.node(old).kafka;
    eventually("offset committed", Duration::from_secs(20), || async move {
        (commit_offset(old_addr, group, 42).await == 0).then_some(())
    })
    .await;
    assert_eq!(fetch_offset(old_addr, group).await, (0, 42));
    // Give the followers of the offsets partition a few fetch rounds.
    tokio::time::sleep(Duration::from_secs(2)).await;

    cluster.kill9(old);
    let (new, port) = eventually(
        "a new coordinator",
        Duration::from_secs(30),
        || async move {
            find_coordinator(n1, group)
                .await
                .filter(|(node, _)| *node != old)
        },
    )
    .await;
    let new_addr = cluster.node(new).kafka;
    assert_eq!(i32::from(new_addr.port()), port);
    // The new leader loads the partition and serves the committed offset.
    eventually(
        "offset served by the new coordinator",
        Duration::from_secs(30),
        || async move { (fetch_offset(new_addr, group).await == (0, 42)).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_roles_controller_only_and_broker_only_nodes() {
    // Voters 1, 2 (broker too) and 3 (controller only); node 4 a broker only.
    let roles = [
        (1, None),
        (2, Some("broker,controller")),
        (3, Some("controller")),
        (4, Some("broker")),
    ];
    let cluster = Cluster::start_with_roles(&roles, SETTINGS, Duration::from_secs(60));
    let n4 = cluster.node(4).kafka;
    let brokers: BTreeSet<i32> = [1, 2, 4].into();
    let brokers = &brokers;
    let m = eventually("brokers 1, 2, 4", Duration::from_secs(20), || async move {
        let m = metadata(n4).await;
        (broker_ids(&m) == *brokers).then_some(m)
    })
    .await;
    // The controller is a broker a client can reach: the quorum leader if it is one,
    // else the answering node.
    assert!(
        brokers.contains(&m.controller_id.0),
        "{}",
        m.controller_id.0
    );
    // A change made on the broker-only node goes to the quorum over its controller port.
    assert_eq!(create(n4, "split", 3, 3).await.0, 0);
    for node in [1, 2, 4] {
        let addr = cluster.node(node).kafka;
        let parts = eventually("split visible", Duration::from_secs(10), || async move {
            partitions(&metadata(addr).await, "split")
        })
        .await;
        for (_, replicas) in parts {
            assert_eq!(replicas.into_iter().collect::<BTreeSet<_>>(), *brokers);
        }
    }
    let (code, _) = create(n4, "too-wide", 1, 4).await;
    assert_eq!(code, INVALID_REPLICATION_FACTOR);
}
