//! The migration of a single node's legacy metadata log into its one-voter quorum, and
//! the refusals around it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::Path;

use uuid::Uuid;

use super::MetadataLog;
use crate::image::MetadataImage;
use crate::meta_properties::stored_cluster_id;
use crate::quorum::{
    metadata_dir, start_voter, MetadataQuorum, QuorumConfig, QuorumError, QuorumPeers,
};
use crate::record::{ConfigResource, Endpoint, MetadataRecord};

/// A data directory as an earlier release's single node left it: two topics (one with
/// a moved leader epoch and a config), a broker config, a producer-id block.
fn legacy_data_dir(data_dir: &Path) -> MetadataImage {
    let meta = metadata_dir(data_dir);
    let (mut log, mut image) = MetadataLog::open(&meta).unwrap();
    crate::meta_properties::bind_node_id(&meta, 1).unwrap();
    let orders = Uuid::from_u128(0xA);
    let keys = Uuid::from_u128(0xB);
    let records = vec![
        MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation: Uuid::from_u128(1),
            epoch: 0,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: None,
        },
        MetadataRecord::Topic {
            name: "orders".into(),
            topic_id: orders,
        },
        MetadataRecord::Partition {
            topic_id: orders,
            partition: 0,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 7,
            partition_epoch: 9,
            adding_replicas: vec![],
            removing_replicas: vec![],
        },
        MetadataRecord::Config {
            resource: ConfigResource::Topic("orders".into()),
            name: "retention.ms".into(),
            value: Some("86400000".into()),
        },
        MetadataRecord::Topic {
            name: "keys".into(),
            topic_id: keys,
        },
        MetadataRecord::Partition {
            topic_id: keys,
            partition: 0,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
        },
        MetadataRecord::Config {
            resource: ConfigResource::Broker(1),
            name: "log.retention.ms".into(),
            value: Some("5000".into()),
        },
        MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: 2000,
        },
    ];
    let first = log.next_offset();
    log.append(&records).unwrap();
    for (offset, record) in (first..).zip(&records) {
        image.replay(offset, record);
    }
    image
}

fn topics_of(image: &MetadataImage) -> Vec<crate::image::TopicImage> {
    image.topics().cloned().collect()
}

#[tokio::test]
async fn a_single_node_directory_migrates_with_everything_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = legacy_data_dir(dir.path());
    let cluster_id = stored_cluster_id(&metadata_dir(dir.path()))
        .unwrap()
        .unwrap();
    let config = QuorumConfig::single_node(dir.path(), 1).unwrap();
    let quorum = start_voter(config).await.unwrap();
    let image = quorum.image();
    assert_eq!(topics_of(&image), topics_of(&legacy));
    assert_eq!(
        image.topic("orders").unwrap().partitions[&0].leader_epoch,
        7
    );
    assert_eq!(image.cluster_id(), cluster_id, "the cluster id is kept");
    assert_eq!(image.next_producer_id(), 2000);
    assert_eq!(
        image
            .broker_configs
            .get(&1)
            .and_then(|c| c.get("log.retention.ms")),
        Some(&"5000".to_string())
    );
    quorum.shutdown().await.unwrap();
    let meta = metadata_dir(dir.path());
    assert!(super::legacy_files(&meta).unwrap().is_empty(), "set aside");
    assert!(meta
        .join("legacy-metadata-log/00000000000000000000.log")
        .is_file());

    // The next start is an ordinary one: nothing migrates twice.
    let quorum = start_voter(QuorumConfig::single_node(dir.path(), 1).unwrap())
        .await
        .unwrap();
    assert_eq!(topics_of(&quorum.image()), topics_of(&legacy));
    assert_eq!(quorum.image().last_offset(), image.last_offset());
    quorum.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_migration_cut_short_runs_again_or_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = legacy_data_dir(dir.path());
    let meta = metadata_dir(dir.path());
    // A crash before the commit point left a half-built quorum: it is built again.
    std::fs::create_dir_all(meta.join("quorum.migrating")).unwrap();
    std::fs::write(meta.join("quorum.migrating/raft.log"), b"garbage").unwrap();
    let quorum = start_voter(QuorumConfig::single_node(dir.path(), 1).unwrap())
        .await
        .unwrap();
    assert_eq!(topics_of(&quorum.image()), topics_of(&legacy));
    quorum.shutdown().await.unwrap();
    assert!(!meta.join("quorum.migrating").exists());

    // A crash after the commit point, before the old files moved: they move now, and
    // the quorum is not touched.
    let moved = meta.join("legacy-metadata-log/00000000000000000000.log");
    std::fs::rename(&moved, meta.join("00000000000000000000.log")).unwrap();
    let quorum = start_voter(QuorumConfig::single_node(dir.path(), 1).unwrap())
        .await
        .unwrap();
    assert_eq!(topics_of(&quorum.image()), topics_of(&legacy));
    quorum.shutdown().await.unwrap();
    assert!(moved.is_file());
    assert!(super::legacy_files(&meta).unwrap().is_empty());
}

#[tokio::test]
async fn a_cluster_voter_refuses_an_unmigrated_single_node_directory() {
    let dir = tempfile::tempdir().unwrap();
    legacy_data_dir(dir.path());
    let peers = QuorumPeers::parse("1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3").unwrap();
    let config = QuorumConfig::in_data_dir(dir.path(), 1, peers).unwrap();
    let err = start_voter(config).await.unwrap_err();
    let QuorumError::LegacyMetadata(message) = &err else {
        panic!("{err}");
    };
    assert!(message.contains("2 topics: keys, orders"), "{message}");
    assert!(message.contains("without --quorum"), "{message}");
    // Nothing was changed: the single node still migrates.
    assert!(!super::legacy_files(&metadata_dir(dir.path()))
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn switching_between_a_single_node_and_a_cluster_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let quorum = start_voter(QuorumConfig::single_node(dir.path(), 1).unwrap())
        .await
        .unwrap();
    quorum.shutdown().await.unwrap();
    drop(quorum);
    let peers = QuorumPeers::parse("1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3").unwrap();
    let config = QuorumConfig::in_data_dir(dir.path(), 1, peers.clone()).unwrap();
    let err = start_voter(config).await.unwrap_err();
    assert!(matches!(err, QuorumError::VotersMismatch { .. }), "{err}");
    assert!(err.to_string().contains("a single node"), "{err}");

    // The same voter alone, now with a controller listener, is the same quorum.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let one = QuorumPeers::parse(&format!("1@{addr}")).unwrap();
    let quorum = start_voter(QuorumConfig::in_data_dir(dir.path(), 1, one).unwrap())
        .await
        .unwrap();
    quorum.shutdown().await.unwrap();
    drop(quorum);

    // A cluster voter's directory started as a single node: refused too.
    let other = tempfile::tempdir().unwrap();
    let config = QuorumConfig::in_data_dir(other.path(), 1, peers).unwrap();
    let cluster = start_voter(config).await.unwrap();
    cluster.shutdown().await.unwrap();
    drop(cluster);
    let err = start_voter(QuorumConfig::single_node(other.path(), 1).unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"),
        "{err}"
    );
}
