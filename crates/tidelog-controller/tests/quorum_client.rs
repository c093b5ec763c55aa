//! A broker-only node reaches the quorum through `ControllerClient`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quorum_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_support::{endpoint, topic, within, Cluster, Tuning};
use tidelog_controller::quorum::{ControllerClient, ControllerHandle, MetadataQuorum};
use tidelog_controller::Uuid;

const STEP: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_only_node_registers_heartbeats_writes_and_follows_the_image() {
    let mut cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let client = ControllerClient::new(
        &cluster.peers,
        cluster.peers.derived_cluster_id(),
        Duration::from_secs(5),
    );

    let epoch = client
        .register_broker(
            7,
            Uuid::from_u128(77),
            endpoint(9777),
            Some("rack-b".into()),
        )
        .await
        .unwrap();
    let reply = client.broker_heartbeat(7, epoch).await.unwrap();
    assert!(!reply.fenced);
    client
        .create_topic(topic("from-broker"), false)
        .await
        .unwrap();
    // The internal topics' rules hold over the wire and through a follower's forwarding:
    // a client's creation is refused, the broker's own internal creation goes through,
    // and deleting the topic is refused wherever it is asked.
    let refused = client
        .create_topic(topic("__consumer_offsets"), false)
        .await
        .unwrap_err();
    assert_eq!(refused.error_code(), 42, "{refused}");
    assert!(
        refused.to_string().contains("Creation of internal topic"),
        "{refused}"
    );
    let mut offsets = topic("__consumer_offsets");
    offsets.configs = vec![("cleanup.policy".into(), Some("compact".into()))];
    client.create_internal_topic(offsets).await.unwrap();
    let follower = cluster.followers(leader)[0];
    for refused in [
        client.delete_topic("__consumer_offsets").await.unwrap_err(),
        cluster
            .node(follower)
            .controller
            .delete_topic("__consumer_offsets")
            .await
            .unwrap_err(),
    ] {
        assert_eq!(refused.error_code(), 42, "{refused}");
        assert!(
            refused.to_string().contains("Deletion of internal topic"),
            "{refused}"
        );
    }
    let status = client.describe_quorum().await.unwrap();
    assert_eq!(status.leader, Some(leader));
    let ids = client.allocate_producer_ids(7, epoch).await.unwrap();
    assert_eq!(ids.end - ids.start, 1000);

    // The whole image, equal to the leader's once it has caught up.
    cluster.converged_on(leader, STEP).await;
    let want = cluster.node(leader).quorum.image();
    let image = client
        .fetch_image(None, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(image, *want);
    assert_eq!(image.broker(7).unwrap().rack.as_deref(), Some("rack-b"));

    // Nothing newer: the long poll ends empty after about its wait.
    let started = Instant::now();
    let none = client
        .fetch_image(image.last_offset(), Duration::from_millis(300))
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );

    // A change wakes the long poll well before its wait ends.
    let after = image.last_offset();
    let poll = client.fetch_image(after, Duration::from_secs(8));
    let change = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster
            .node(leader)
            .controller
            .create_topic(topic("wakes"), false)
            .await
            .unwrap();
    };
    let started = Instant::now();
    let (newer, ()) = within(STEP, "the long poll", async { tokio::join!(poll, change) }).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    let newer = newer.unwrap().expect("a newer image");
    assert!(newer.last_offset() > after);
    assert!(newer.topic("wakes").is_some());

    // Requests still work with any one voter down, including the leader.
    cluster.kill(leader).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.create_topic(topic("after-failover"), false).await {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "still failing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let reply = client.broker_heartbeat(7, epoch).await.unwrap();
    assert!(!reply.fenced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_cluster_is_refused() {
    let cluster = Cluster::start(1, Tuning::default()).await;
    let client = ControllerClient::new(&cluster.peers, "not-this-cluster", STEP);
    let err = client.create_topic(topic("nope"), false).await.unwrap_err();
    assert!(err.to_string().contains("not-this-cluster"), "{err}");
    assert!(cluster.node(1).quorum.image().topic("nope").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_handle_works_the_same_on_a_voter_and_remotely() {
    let cluster = Cluster::start(3, Tuning::default()).await;
    let leader = cluster.leader(STEP).await;
    let follower = cluster.followers(leader)[0];
    let voter = ControllerHandle::Voter(Arc::clone(&cluster.node(follower).controller));
    let remote = ControllerHandle::Remote(Arc::new(ControllerClient::new(
        &cluster.peers,
        cluster.peers.derived_cluster_id(),
        STEP,
    )));
    for (i, handle) in [voter, remote].iter().enumerate() {
        let id = 10 + i32::try_from(i).unwrap();
        let epoch = handle
            .register_broker(id, Uuid::from_u128(500 + i as u128), endpoint(9500), None)
            .await
            .unwrap();
        assert!(handle.broker_heartbeat(id, epoch).await.is_ok());
        let name = format!("handle-{i}");
        handle.create_topic(topic(&name), false).await.unwrap();
        assert_eq!(handle.describe_quorum().await.unwrap().leader, Some(leader));
        let image = handle
            .image_after(None, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        let last = image.last_offset();
        // The follower's image (or the one fetched) may trail the leader's by a beat.
        let image = if image.topic(&name).is_none() {
            handle.image_after(last, STEP).await.unwrap().unwrap()
        } else {
            image
        };
        assert!(image.topic(&name).is_some());
        // Nothing newer: an empty answer after the wait.
        let latest = image.last_offset();
        let started = Instant::now();
        let none = handle
            .image_after(latest, Duration::from_millis(200))
            .await
            .unwrap();
        assert!(none.is_none());
        assert!(started.elapsed() >= Duration::from_millis(150));
        handle.delete_topic(&name).await.unwrap();
    }
}
