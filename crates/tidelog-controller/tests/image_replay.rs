//! Replay semantics of single records.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use tidelog_controller::{ConfigResource, MetadataImage, MetadataRecord, PartitionImage, Uuid};

const ID: Uuid = Uuid::from_u128(42);

fn image_with_partition() -> MetadataImage {
    let mut image = MetadataImage::new("cluster");
    image.replay(
        0,
        &MetadataRecord::Topic {
            name: "t".into(),
            topic_id: ID,
        },
    );
    image.replay(
        1,
        &MetadataRecord::Partition {
            topic_id: ID,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 9,
            adding_replicas: vec![],
            removing_replicas: vec![],
        },
    );
    image
}

fn partition(image: &MetadataImage) -> &PartitionImage {
    &image.topic("t").unwrap().partitions[&0]
}

fn change(
    leader: Option<i32>,
    isr: Option<Vec<i32>>,
    replicas: Option<Vec<i32>>,
) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id: ID,
        partition: 0,
        leader,
        isr,
        replicas,
        adding_replicas: None,
        removing_replicas: None,
    }
}

#[test]
fn partition_change_bumps_epochs_like_kafka() {
    let mut image = image_with_partition();
    image.replay(2, &change(None, Some(vec![1, 2]), None));
    assert_eq!(partition(&image).isr, [1, 2]);
    assert_eq!(
        (
            partition(&image).leader_epoch,
            partition(&image).partition_epoch
        ),
        (4, 10),
        "ISR change: partition epoch only"
    );

    image.replay(3, &change(Some(2), None, None));
    assert_eq!(partition(&image).leader, 2);
    assert_eq!(
        (
            partition(&image).leader_epoch,
            partition(&image).partition_epoch
        ),
        (5, 11),
        "new leader: both"
    );

    image.replay(4, &change(Some(2), None, Some(vec![2, 3])));
    assert_eq!(partition(&image).replicas, [2, 3]);
    assert_eq!(
        (
            partition(&image).leader_epoch,
            partition(&image).partition_epoch
        ),
        (5, 12),
        "same leader: no leader bump"
    );

    image.replay(5, &change(Some(-1), Some(vec![]), None));
    assert_eq!(partition(&image).leader, -1);
    assert_eq!(partition(&image).leader_epoch, 6);
}

#[test]
fn records_at_or_below_the_last_offset_are_ignored() {
    let mut image = image_with_partition();
    let before = image.clone();
    image.replay(1, &MetadataRecord::RemoveTopic { topic_id: ID });
    image.replay(0, &change(Some(3), None, None));
    assert_eq!(image, before);
    assert_eq!(image.last_offset(), Some(1));
}

#[test]
fn records_about_missing_things_change_nothing_but_the_offset() {
    let mut image = image_with_partition();
    let other = Uuid::from_u128(7);
    let mut expected = image.clone();
    image.replay(2, &MetadataRecord::RemoveTopic { topic_id: other });
    image.replay(
        3,
        &MetadataRecord::PartitionChange {
            topic_id: ID,
            partition: 5,
            leader: Some(1),
            isr: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        },
    );
    image.replay(
        4,
        &MetadataRecord::Config {
            resource: ConfigResource::Topic("nope".into()),
            name: "retention.ms".into(),
            value: Some("1".into()),
        },
    );
    image.replay(
        5,
        &MetadataRecord::Partition {
            topic_id: other,
            partition: 0,
            replicas: vec![],
            isr: vec![],
            leader: -1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
        },
    );
    assert_eq!(image.last_offset(), Some(5));
    expected.replay(
        5,
        &MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: 0,
        },
    );
    assert_eq!(image, expected);
}

#[test]
fn configs_for_brokers_and_cluster_are_kept_apart() {
    let mut image = MetadataImage::new("c");
    let set = |resource, value: Option<&str>| MetadataRecord::Config {
        resource,
        name: "log.retention.ms".into(),
        value: value.map(str::to_owned),
    };
    image.replay(0, &set(ConfigResource::Broker(1), Some("5")));
    image.replay(1, &set(ConfigResource::Cluster, Some("6")));
    assert_eq!(
        image
            .broker_configs(1)
            .get("log.retention.ms")
            .map(String::as_str),
        Some("5")
    );
    assert!(image.broker_configs(2).is_empty());
    assert_eq!(
        image
            .cluster_configs()
            .get("log.retention.ms")
            .map(String::as_str),
        Some("6")
    );
    image.replay(2, &set(ConfigResource::Broker(1), None));
    assert!(image.broker_configs(1).is_empty());
    assert_eq!(image.cluster_configs().len(), 1);
}

#[test]
fn producer_id_mark_never_moves_back() {
    let mut image = MetadataImage::new("c");
    image.replay(
        0,
        &MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: 2000,
        },
    );
    image.replay(
        1,
        &MetadataRecord::ProducerIds {
            broker_id: 2,
            broker_epoch: 0,
            next_producer_id: 1000,
        },
    );
    assert_eq!(image.next_producer_id(), 2000);
}

#[test]
fn recreating_a_name_replaces_the_old_topic_and_its_id() {
    let mut image = image_with_partition();
    let new_id = Uuid::from_u128(43);
    image.replay(
        2,
        &MetadataRecord::Topic {
            name: "t".into(),
            topic_id: new_id,
        },
    );
    assert!(image.topic_by_id(&ID).is_none());
    assert_eq!(image.topic("t").unwrap().topic_id, new_id);
    assert!(image.topic("t").unwrap().partitions.is_empty());
    assert_eq!(image.topic_count(), 1);
}

#[test]
fn a_repeated_topic_record_keeps_the_partitions_and_a_reused_id_drops_the_old_name() {
    let mut image = image_with_partition();
    image.replay(
        2,
        &MetadataRecord::Topic {
            name: "t".into(),
            topic_id: ID,
        },
    );
    assert_eq!(image.topic("t").unwrap().partitions.len(), 1);
    image.replay(
        3,
        &MetadataRecord::Topic {
            name: "u".into(),
            topic_id: ID,
        },
    );
    assert!(image.topic("t").is_none());
    assert_eq!(image.topic("u").unwrap().topic_id, ID);
    assert_eq!(image.topics().count(), 1);
}
