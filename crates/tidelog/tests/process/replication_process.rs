//! Replication across three real `tidelog serve --quorum ...` processes: acks=all
//! produces to an RF 3 topic come back byte for byte from the leader; a SIGSTOPped
//! follower leaves the ISR after replica.lag.time.max.ms while acks=all keeps working,
//! and rejoins after SIGCONT; after kill -9 of the leader every acknowledged batch
//! comes back, byte for byte, from the new leader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchResponse, MetadataRequest, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use support::cluster::Cluster;
use support::cluster_calls::latest_offset;
use support::Conn;
use tidelog_storage::BatchBuilder;

const TOPIC: &str = "replicated";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const FENCED_LEADER_EPOCH: i16 = 74;

const SETTINGS: &[&str] = &[
    // Longer than the lag bound, so a stopped follower leaves the ISR by the leader's
    // ISR check, not by being fenced.
    "broker.session.timeout.ms=8000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=2000",
    "min.insync.replicas=2",
    "offsets.topic.num.partitions=1",
];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn metadata(addr: SocketAddr) -> MetadataResponse {
    let mut conn = Conn::connect(addr).await;
    conn.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    )
    .await
}

/// (leader, isr) of partition 0 of TOPIC as `addr` sees it.
async fn leader_and_isr(addr: SocketAddr) -> Option<(i32, Vec<i32>)> {
    let m = metadata(addr).await;
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Some((p.leader_id.0, isr))
}

async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn batch(i: usize) -> Vec<u8> {
    let value = format!("value-{i:05}-{}", "x".repeat(i % 50));
    BatchBuilder::new()
        .kv(
            Some(format!("k{i}").as_bytes()),
            Some(value.as_bytes()),
            1_000 + i as i64,
        )
        .kv(Some(b"second"), Some(value.as_bytes()), 1_000 + i as i64)
        .build()
        .unwrap()
}

/// Produces one batch with acks=all; returns (error code, base offset).
async fn produce(conn: &mut Conn, bytes: &[u8]) -> (i16, i64) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(20_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::copy_from_slice(bytes)))])]);
    let resp: ProduceResponse = conn.call(ApiKey::Produce, 9, &req).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every batch below the high watermark, as stored, read from `addr` (which must lead).
async fn read_all(addr: SocketAddr) -> (i16, i64, Vec<Vec<u8>>) {
    let mut conn = Conn::connect(addr).await;
    let mut batches = Vec::new();
    let mut offset = 0i64;
    loop {
        let req = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(16 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(8 << 20)])]);
        let resp: FetchResponse = conn.call(ApiKey::Fetch, 12, &req).await;
        let p = &resp.responses[0].partitions[0];
        if p.error_code != 0 {
            return (p.error_code, p.high_watermark, batches);
        }
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return (0, p.high_watermark, batches);
        }
        let mut at = 0usize;
        while at + 12 <= records.len() {
            let len =
                i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize + 12;
            let b = records[at..at + len].to_vec();
            let last_delta = i32::from_be_bytes(b[23..27].try_into().unwrap()) as i64;
            offset = i64::from_be_bytes(b[0..8].try_into().unwrap()) + last_delta + 1;
            batches.push(b);
            at += len;
        }
    }
}

/// The produced batch as the leader stores it: base offset and leader epoch set
/// (both outside the CRC), every other byte as sent.
fn assert_same(stored: &[u8], sent: &[u8], base_offset: i64) {
    assert_eq!(stored.len(), sent.len());
    assert_eq!(&stored[0..8], &base_offset.to_be_bytes());
    assert_eq!(&stored[8..12], &sent[8..12]);
    assert_eq!(&stored[16..], &sent[16..], "batch at {base_offset} differs");
}

/// The process id of a node, found by its data directory on the command line.
fn pid_of(cluster: &Cluster, node: i32) -> String {
    let dir = cluster.node(node).data_dir.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "serve") && args.contains(&dir) {
            return entry.file_name().to_string_lossy().into_owned();
        }
    }
    panic!("no process for node {node}");
}

fn signal(pid: &str, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid)
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_survives_a_stopped_follower_and_a_killed_leader() {
    let mut cluster = Cluster::start(3, SETTINGS, Duration::from_secs(60));
    let n1 = cluster.node(1).kafka;
    let mut conn = Conn::connect(n1).await;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let created: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(created.topics[0].error_code, 0);
    let (leader, isr) = eventually(
        "RF 3 partition led",
        Duration::from_secs(20),
        || async move {
            leader_and_isr(n1)
                .await
                .filter(|(l, isr)| *l > 0 && isr.len() == 3)
        },
    )
    .await;
    assert_eq!(isr, vec![1, 2, 3]);
    let leader_addr = cluster.node(leader).kafka;
    eventually("leader ready", Duration::from_secs(10), || async move {
        leader_and_isr(leader_addr)
            .await
            .filter(|(l, _)| *l == leader)
    })
    .await;

    // acks=all to the leader, then everything back byte for byte.
    let mut sent: Vec<(Vec<u8>, i64)> = Vec::new();
    let mut to_leader = Conn::connect(leader_addr).await;
    let mut next_offset = 0;
    for i in 0..40 {
        let b = batch(i);
        let (code, base) = produce(&mut to_leader, &b).await;
        assert_eq!(code, 0, "acks=all produce {i}");
        assert_eq!(base, next_offset);
        next_offset += 2;
        sent.push((b, base));
    }
    let (code, hw, stored) = read_all(leader_addr).await;
    assert_eq!((code, hw), (0, next_offset));
    assert_eq!(stored.len(), sent.len());
    for (s, (b, base)) in stored.iter().zip(&sent) {
        assert_same(s, b, *base);
    }

    // SIGSTOP one follower: it leaves the ISR within the lag bound (plus the check
    // interval and the controller round trip); acks=all keeps succeeding.
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let pid = pid_of(&cluster, follower);
    signal(&pid, "STOP");
    let stopped_at = Instant::now();
    let shrunk = eventually(
        "stopped follower leaves the ISR",
        Duration::from_secs(15),
        || async move {
            leader_and_isr(leader_addr)
                .await
                .filter(|(l, isr)| *l == leader && !isr.contains(&follower) && isr.len() == 2)
        },
    )
    .await;
    let took = stopped_at.elapsed();
    assert!(took >= Duration::from_millis(1500), "left after {took:?}");
    assert!(shrunk.1.contains(&leader));
    for i in 40..50 {
        let b = batch(i);
        let (code, base) = produce(&mut to_leader, &b).await;
        assert_eq!(code, 0, "acks=all with one follower stopped, produce {i}");
        assert_eq!(base, next_offset);
        next_offset += 2;
        sent.push((b, base));
    }
    signal(&pid, "CONT");
    eventually(
        "follower rejoins the ISR",
        Duration::from_secs(20),
        || async move {
            leader_and_isr(leader_addr)
                .await
                .filter(|(_, isr)| isr.len() == 3)
        },
    )
    .await;

    // kill -9 the leader: a new one is elected from the ISR and serves every
    // acknowledged batch, byte for byte.
    cluster.kill9(leader);
    let survivor = cluster.node(follower).kafka;
    let (new_leader, _) = eventually("a new leader", Duration::from_secs(20), || async move {
        leader_and_isr(survivor)
            .await
            .filter(|(l, _)| *l > 0 && *l != leader)
    })
    .await;
    let new_addr = cluster.node(new_leader).kafka;
    let expected = next_offset;
    let (_, _, stored) = eventually(
        "everything readable on the new leader",
        Duration::from_secs(20),
        || async move {
            let read = read_all(new_addr).await;
            (read.0 == 0 && read.1 >= expected).then_some(read)
        },
    )
    .await;
    assert_eq!(stored.len(), sent.len());
    for (s, (b, base)) in stored.iter().zip(&sent) {
        assert_same(s, b, *base);
    }
    // And it takes new acks=all writes with the two survivors (min.insync.replicas=2).
    let mut to_new = Conn::connect(new_addr).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, base) = produce(&mut to_new, &batch(99)).await;
        if code == 0 {
            assert_eq!(base, expected);
            break;
        }
        // Only refusals that happen before the append may be retried.
        assert!(
            code == NOT_LEADER_OR_FOLLOWER || code == NOT_ENOUGH_REPLICAS,
            "acks=all on the new leader: {code}"
        );
        assert!(
            Instant::now() < deadline,
            "acks=all on the new leader: {code}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The epoch the first leader stamped into its batches ended where the new leader's
    // epoch began: OffsetForLeaderEpoch says so; a request naming that old epoch as
    // current is fenced.
    let old_epoch = i32::from_be_bytes(stored[0][12..16].try_into().unwrap());
    assert_eq!(
        offset_for_epoch(new_addr, -1, old_epoch).await,
        (0, old_epoch, expected)
    );
    assert_eq!(
        offset_for_epoch(new_addr, old_epoch, old_epoch).await.0,
        FENCED_LEADER_EPOCH
    );
    // The other survivor follows: it answers no ListOffsets.
    let other = [1, 2, 3]
        .into_iter()
        .find(|&n| n != leader && n != new_leader)
        .unwrap();
    assert_eq!(
        latest_offset(cluster.node(other).kafka, TOPIC).await,
        (NOT_LEADER_OR_FOLLOWER, -1)
    );
    assert_eq!(latest_offset(new_addr, TOPIC).await, (0, expected + 2));
    // A replica fetch from a node id that is no broker of this cluster is refused.
    let mut conn = Conn::connect(new_addr).await;
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(99))
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let resp: FetchResponse = conn.call(ApiKey::Fetch, 12, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
}

/// OffsetForLeaderEpoch v4 for partition 0: (error, epoch, end offset).
async fn offset_for_epoch(addr: SocketAddr, current: i32, epoch: i32) -> (i16, i32, i64) {
    let mut conn = Conn::connect(addr).await;
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])]);
    let resp: OffsetForLeaderEpochResponse = conn.call(ApiKey::OffsetForLeaderEpoch, 4, &req).await;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}
