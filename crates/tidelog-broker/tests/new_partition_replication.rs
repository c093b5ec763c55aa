//! A partition created while the followers are in a long poll of the leader's other
//! partitions is replicated as fast as an established one: its first acks=all write is
//! acknowledged without waiting out `replica.fetch.wait.max.ms` or
//! `replica.fetch.backoff.ms` (both set far above what the test allows).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use tidelog_env::net::MemoryNetwork;

use support::{eventually, partition_state, produce, Cluster, FAILOVER};

const LONG_POLL_MS: &str = "10000";
/// Well under the long poll and the backoff: what a new partition's first write may take.
const NEW_PARTITION_BUDGET: Duration = Duration::from_secs(5);

/// The leader of partition 0 of `topic` once its ISR holds all three nodes.
async fn full_isr_leader(net: &MemoryNetwork, topic: &str) -> i32 {
    eventually(
        "the partition has a leader and a full ISR",
        FAILOVER,
        || async {
            let (leader, isr) = partition_state(net, topic, 1).await?;
            (leader > 0 && isr == [1, 2, 3]).then_some(leader)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_partitions_first_acks_all_write_does_not_wait_for_the_followers_long_poll() {
    let cluster = Cluster::start(&[
        ("replica.fetch.wait.max.ms", LONG_POLL_MS),
        ("replica.fetch.backoff.ms", LONG_POLL_MS),
    ])
    .await;
    let net = cluster.net.clone();
    cluster.create_topic("established", &[]).await;
    let leader = full_isr_leader(&net, "established").await;
    eventually(
        "the established topic takes acks=all writes",
        FAILOVER,
        || produce(&net, leader, leader, "established", "warm-up", 30_000),
    )
    .await;

    for round in 0..3 {
        // This write completes the followers' long polls; each starts a new 10 s one
        // right away, which the new topic's partition must not wait for.
        eventually("a write to the established topic", FAILOVER, || {
            produce(&net, leader, leader, "established", "again", 30_000)
        })
        .await;
        let topic = format!("fresh-{round}");
        let started = Instant::now();
        cluster.create_topic(&topic, &[]).await;
        let new_leader = full_isr_leader(&net, &topic).await;
        let offset = eventually("the new topic takes an acks=all write", FAILOVER, || {
            produce(&net, new_leader, new_leader, &topic, "first", 30_000)
        })
        .await;
        let took = started.elapsed();
        assert_eq!(offset, 0);
        assert!(
            took < NEW_PARTITION_BUDGET,
            "round {round}: the new partition's first acks=all write took {took:?} \
             (the followers' long poll is {LONG_POLL_MS} ms)"
        );
    }
    cluster.shutdown().await;
}
