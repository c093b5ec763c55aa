//! Three whole nodes in one process on the in-memory network: their controller quorum,
//! their follower fetchers and their Kafka listeners all speak over it. The partition
//! leader is cut off; the majority elects another leader and keeps acknowledging
//! acks=all writes, the isolated leader acknowledges none, and once the network heals
//! the old leader catches up and every acknowledged record is at its offset.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_env::net::MemoryNetwork;
use tidelog_records::LogRecords;

use support::{call, eventually, host, partition_state, produce, Cluster, FAILOVER};

const TOPIC: &str = "orders";

/// Every record of partition 0 up to the high watermark, read from `leader`.
async fn read_all(net: &MemoryNetwork, leader: i32) -> Option<BTreeMap<i64, String>> {
    let mut records = BTreeMap::new();
    let mut offset = 0;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response: FetchResponse =
            call(net, leader, leader, ApiKey::Fetch, 12, &request).await?;
        let data = response.responses.first()?.partitions.first()?;
        if data.error_code != 0 {
            return None;
        }
        let bytes = data.records.clone().unwrap_or_default();
        let mut walked = LogRecords::new(bytes);
        for record in walked.by_ref() {
            let record = record.ok()?;
            let value =
                String::from_utf8(record.value.map(|v| v.to_vec()).unwrap_or_default()).ok()?;
            records.insert(record.offset, value);
        }
        match walked.next_offset() {
            Some(next) if next > offset && next < data.high_watermark => offset = next,
            _ => return Some(records),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_acknowledges_nothing_and_the_majority_keeps_every_acknowledged_write() {
    let cluster = Cluster::start(&[
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "300"),
        ("replica.lag.time.max.ms", "2000"),
        ("replica.fetch.wait.max.ms", "200"),
        ("replica.fetch.backoff.ms", "200"),
    ])
    .await;
    let net = cluster.net.clone();
    cluster
        .create_topic(TOPIC, &[("min.insync.replicas", "2")])
        .await;
    let old = eventually(
        "the partition has a leader and a full ISR",
        FAILOVER,
        || async {
            let (leader, isr) = partition_state(&net, TOPIC, 1).await?;
            (leader > 0 && isr == [1, 2, 3]).then_some(leader)
        },
    )
    .await;

    let mut acknowledged: Vec<(i64, String)> = Vec::new();
    for i in 0..20 {
        let value = format!("before-{i}");
        let offset = eventually("a write before the partition", FAILOVER, || {
            produce(&net, old, old, TOPIC, &value, 5_000)
        })
        .await;
        acknowledged.push((offset, value));
    }

    net.isolate(host(old));
    // The isolated leader can reach no follower and no controller: acks=all fails.
    assert_eq!(
        produce(&net, old, old, TOPIC, "never-acknowledged", 1_500).await,
        None
    );

    let survivor = (1..=3).find(|id| *id != old).unwrap();
    let new = eventually("the majority elects another leader", FAILOVER, || async {
        let (leader, _) = partition_state(&net, TOPIC, survivor).await?;
        (leader > 0 && leader != old).then_some(leader)
    })
    .await;
    for i in 0..20 {
        let value = format!("during-{i}");
        let offset = eventually("a write to the new leader", FAILOVER, || {
            produce(&net, new, new, TOPIC, &value, 5_000)
        })
        .await;
        acknowledged.push((offset, value));
    }

    net.heal_all();
    eventually(
        "the old leader catches up and rejoins the ISR",
        FAILOVER,
        || async {
            let (leader, isr) = partition_state(&net, TOPIC, new).await?;
            (leader == new && isr == [1, 2, 3]).then_some(())
        },
    )
    .await;
    let log = eventually("the log is readable", FAILOVER, || read_all(&net, new)).await;
    for (offset, value) in &acknowledged {
        assert_eq!(
            log.get(offset),
            Some(value),
            "acknowledged record at offset {offset}"
        );
    }
    cluster.shutdown().await;
}
