//! Process tests of whose partition directories are served: `partition.metadata` pins a
//! directory to one topic id, so a topic re-created under an old name never serves the
//! old topic's records, while directories of an earlier release (no file) are adopted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::cluster_calls::latest_offset;
use support::{Conn, Node};
use tidelog_storage::{
    AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig, PARTITION_METADATA,
};
use uuid::Uuid;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn batch(i: usize) -> Vec<u8> {
    BatchBuilder::new()
        .kv(
            Some(format!("k{i}").as_bytes()),
            Some(b"old"),
            1_000 + i as i64,
        )
        .build()
        .unwrap()
}

/// Creates a one-partition topic; returns its id.
async fn create(addr: SocketAddr, topic: &str) -> Uuid {
    let mut conn = Conn::connect(addr).await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 7, &req).await;
    let t = &resp.topics[0];
    assert_eq!(t.error_code, 0, "{:?}", t.error_message);
    t.topic_id
}

async fn produce(addr: SocketAddr, topic: &str, bytes: &[u8]) -> (i16, i64) {
    let mut conn = Conn::connect(addr).await;
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::copy_from_slice(bytes)))])]);
    let resp: ProduceResponse = conn.call(ApiKey::Produce, 9, &req).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The directories in `data_dir` renamed aside for deletion from `partition_dir`.
fn renamed_aside(data_dir: &Path, partition_dir: &str) -> Vec<PathBuf> {
    std::fs::read_dir(data_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with(&format!("{partition_dir}.")) && n.ends_with("-delete")
        })
        .map(|e| e.path())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_under_the_name_of_another_topics_directory_starts_empty() {
    // A directory as another topic (another id) left it: five records.
    let foreign_id = Uuid::new_v4();
    let node = Node::start_prepared(&["log.segment.delete.delay.ms=3000"], |data_dir| {
        let dir = data_dir.join("reused-0");
        let (mut log, _) = Log::open_partition(&dir, foreign_id, LogConfig::default()).unwrap();
        let opts = AppendOptions {
            leader_epoch: 0,
            now_ms: 1_000,
            origin: AppendOrigin::Client,
        };
        for i in 0..5 {
            log.append(&mut batch(i), &opts).unwrap();
        }
        log.close().unwrap();
    });

    let topic_id = create(node.kafka, "reused").await;
    assert_ne!(topic_id, foreign_id);
    assert_eq!(
        latest_offset(node.kafka, "reused").await,
        (0, 0),
        "the new topic must not serve the old topic's records"
    );
    let dir = node.data_dir.join("reused-0");
    assert_eq!(
        tidelog_storage::read_topic_id(&dir).unwrap(),
        Some(topic_id)
    );
    let aside = renamed_aside(&node.data_dir, "reused-0");
    assert_eq!(
        aside.len(),
        1,
        "the old directory is renamed aside: {aside:?}"
    );
    assert_eq!(
        tidelog_storage::read_topic_id(&aside[0]).unwrap(),
        Some(foreign_id),
        "with the old records and id, until the delay passes"
    );
    assert!(aside[0].join("00000000000000000000.log").exists());

    // The new topic works as any other.
    assert_eq!(produce(node.kafka, "reused", &batch(0)).await, (0, 0));
    assert_eq!(latest_offset(node.kafka, "reused").await, (0, 1));

    // After log.segment.delete.delay.ms the renamed directory is gone.
    let deadline = Instant::now() + Duration::from_secs(20);
    while aside[0].exists() {
        assert!(
            Instant::now() < deadline,
            "renamed directory not deleted within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(dir.join(PARTITION_METADATA).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_without_partition_metadata_are_adopted_with_their_records() {
    let mut node = Node::start(&[]);
    let topic_id = create(node.kafka, "legacy").await;
    for i in 0..3 {
        assert_eq!(
            produce(node.kafka, "legacy", &batch(i)).await,
            (0, i as i64)
        );
    }
    assert!(node.stop(), "clean stop");

    // As an earlier release left its directories: no partition.metadata anywhere.
    let mut removed = 0;
    for entry in std::fs::read_dir(&node.data_dir).unwrap() {
        let file = entry.unwrap().path().join(PARTITION_METADATA);
        if file.exists() {
            std::fs::remove_file(file).unwrap();
            removed += 1;
        }
    }
    assert!(
        removed >= 1,
        "every partition directory holds partition.metadata"
    );

    node.restart();
    assert_eq!(
        latest_offset(node.kafka, "legacy").await,
        (0, 3),
        "records kept"
    );
    let dir = node.data_dir.join("legacy-0");
    assert_eq!(
        tidelog_storage::read_topic_id(&dir).unwrap(),
        Some(topic_id),
        "the current topic id is written into the adopted directory"
    );
    assert!(renamed_aside(&node.data_dir, "legacy-0").is_empty());
    assert_eq!(produce(node.kafka, "legacy", &batch(3)).await, (0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_is_renamed_aside_at_once_and_removed_after_the_delay() {
    let node = Node::start(&["log.segment.delete.delay.ms=1000"]);
    create(node.kafka, "doomed").await;
    assert_eq!(produce(node.kafka, "doomed", &batch(0)).await, (0, 0));
    let out =
        support::cli_run::tidelog(&node.kafka.to_string(), &["topic", "delete", "doomed"], b"");
    assert!(out.ok, "{}", out.stderr);
    assert!(
        !node.data_dir.join("doomed-0").exists(),
        "the name is free at once"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !renamed_aside(&node.data_dir, "doomed-0").is_empty() {
        assert!(Instant::now() < deadline, "not deleted within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Re-created under the same name: a new, empty partition.
    create(node.kafka, "doomed").await;
    assert_eq!(latest_offset(node.kafka, "doomed").await, (0, 0));
}
