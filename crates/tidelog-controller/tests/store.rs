//! The controller over an in-memory store: replaying its records reproduces the image,
//! and a failed append changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use tidelog_controller::{
    Controller, CreateTopic, Endpoint, MemoryStore, MetadataImage, TopicDefaults,
    SNAPSHOT_EVERY_RECORDS,
};

fn controller() -> Controller<MemoryStore> {
    let mut c = Controller::with_store(
        MemoryStore::new(),
        MetadataImage::new("mem"),
        1,
        TopicDefaults::default(),
    );
    let listener = Endpoint {
        name: "PLAINTEXT".into(),
        host: "h".into(),
        port: 1,
    };
    c.register_broker(vec![listener], Some("rack-a".into()))
        .unwrap();
    c
}

fn create(name: &str, partitions: i32) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: 1,
        assignments: vec![],
        configs: vec![],
    }
}

#[test]
fn replaying_the_stored_records_equals_the_incremental_image() {
    let mut c = controller();
    c.create_topic(create("a", 3), false).unwrap();
    c.create_topic(create("b", 1), false).unwrap();
    c.alter_topic_configs(
        "a",
        vec![("retention.bytes".into(), Some("100".into()))],
        false,
    )
    .unwrap();
    c.create_partitions("b", 4, false).unwrap();
    c.delete_topic("a").unwrap();
    c.allocate_producer_id().unwrap();

    let mut replayed = MetadataImage::new("mem");
    for (offset, record) in &c.store().records {
        replayed.replay(*offset, record);
    }
    assert_eq!(&replayed, c.image());
    assert_eq!(
        replayed.last_offset(),
        Some(c.store().records.len() as u64 - 1)
    );
    assert_eq!(replayed.broker(1).unwrap().rack.as_deref(), Some("rack-a"));
}

#[test]
fn a_failed_append_leaves_the_image_untouched() {
    let mut c = controller();
    c.create_topic(create("a", 1), false).unwrap();
    let before = c.image().clone();
    c.store_mut().fail_appends = true;
    assert_eq!(
        c.create_topic(create("b", 1), false)
            .unwrap_err()
            .error_code(),
        56
    );
    assert_eq!(c.delete_topic("a").unwrap_err().error_code(), 56);
    assert!(c.allocate_producer_id().is_err());
    assert_eq!(c.image(), &before);
    c.store_mut().fail_appends = false;
    c.create_topic(create("b", 1), false).unwrap();
    assert_eq!(c.allocate_producer_id().unwrap(), 0);
}

#[test]
fn a_large_batch_triggers_a_snapshot() {
    let mut c = controller();
    let partitions = i32::try_from(SNAPSHOT_EVERY_RECORDS).unwrap();
    c.create_topic(create("big", partitions), false).unwrap();
    let snap = c.store().last_snapshot.as_ref().expect("snapshot taken");
    assert_eq!(snap, c.image());
    assert_eq!(
        snap.topic("big").unwrap().partitions.len(),
        partitions as usize
    );
}

#[test]
fn shared_image_is_a_stable_view() {
    let mut c = controller();
    let view = c.shared_image();
    c.create_topic(create("later", 1), false).unwrap();
    assert!(view.topic("later").is_none());
    assert!(c.shared_image().topic("later").is_some());
}
