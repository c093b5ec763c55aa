//! Placement as CreateTopics and CreatePartitions see it: live brokers only, racks
//! spread, replication factor bounded by the live brokers.

use uuid::Uuid;

use super::test_support::Images;
use super::{plan_create_partitions, plan_create_topic, CreateTopic, TopicDefaults};
use crate::error::TopicError;
use crate::image::MetadataImage;

fn create(
    image: &MetadataImage,
    name: &str,
    partitions: i32,
    rf: i16,
) -> Result<Vec<Vec<i32>>, TopicError> {
    let req = CreateTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: vec![],
        configs: vec![],
    };
    let plan = plan_create_topic(
        image,
        &req,
        TopicDefaults::default(),
        Uuid::from_u128(99),
        0,
    )?;
    Ok(plan
        .response
        .partitions
        .values()
        .map(|p| p.replicas.clone())
        .collect())
}

#[test]
fn fenced_brokers_get_no_new_replicas() {
    let images = Images::new().brokers(&[1, 2, 3]).fence(2);
    let placed = create(&images.image, "t", 6, 2).unwrap();
    assert_eq!(placed.len(), 6);
    assert!(
        placed.iter().all(|r| r.len() == 2 && !r.contains(&2)),
        "{placed:?}"
    );
}

#[test]
fn replication_beyond_the_live_brokers_is_invalid_replication_factor() {
    let images = Images::new().brokers(&[1, 2, 3]).fence(3);
    let err = create(&images.image, "t", 1, 3).unwrap_err();
    assert_eq!(err.error_code(), 38);
    assert!(err.to_string().contains("only 2 broker(s)"), "{err}");

    // Growing a topic of replication factor 3 needs three live brokers too.
    let mut images = Images::new().brokers(&[1, 2, 3]);
    let plan = plan_create_topic(
        &images.image,
        &CreateTopic {
            name: "grow".into(),
            num_partitions: 1,
            replication_factor: 3,
            assignments: vec![],
            configs: vec![],
        },
        TopicDefaults::default(),
        Uuid::from_u128(7),
        0,
    )
    .unwrap();
    images.apply(&plan.records);
    let images = images.fence(1);
    let err = plan_create_partitions(&images.image, "grow", 2, 0).unwrap_err();
    assert_eq!(err.error_code(), 38);
}

#[test]
fn replicas_spread_over_racks() {
    let mut images = Images::new();
    for (id, rack) in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")] {
        images.register(id, Some(rack));
    }
    let rack = |id: i32| images.image.broker(id).unwrap().rack.clone();
    for replicas in create(&images.image, "r", 12, 3).unwrap() {
        let mut racks: Vec<_> = replicas.iter().map(|r| rack(*r)).collect();
        racks.sort();
        racks.dedup();
        assert_eq!(racks.len(), 3, "{replicas:?}");
    }
}
