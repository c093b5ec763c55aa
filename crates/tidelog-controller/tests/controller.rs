//! The single-node controller: topic requests, their errors, durability across reopen.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::Path;

use tidelog_controller::{Controller, CreateTopic, Endpoint, TopicDefaults, TopicError};

const DEFAULTS: TopicDefaults = TopicDefaults {
    num_partitions: 3,
    replication_factor: 1,
};

fn open(dir: &Path) -> Controller {
    let mut c = Controller::open(dir, 1, DEFAULTS).unwrap();
    c.register_broker(
        vec![Endpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
        }],
        None,
    )
    .unwrap();
    c
}

fn create(name: &str, partitions: i32, rf: i16) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: vec![],
        configs: vec![],
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, TopicError>) -> i16 {
    r.unwrap_err().error_code()
}

/// Asserts a reopened controller sees exactly the same image.
fn assert_survives_reopen(dir: &Path, c: &Controller) {
    let reopened = Controller::open(dir, 1, DEFAULTS).unwrap();
    assert_eq!(reopened.image(), c.image());
}

#[test]
fn create_topic_with_defaults_and_configs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let mut req = create("orders", -1, -1);
    req.configs = vec![("retention.ms".into(), Some("1000".into()))];
    let topic = c.create_topic(req, false).unwrap();
    assert_eq!(topic.partitions.len(), 3);
    for (id, p) in &topic.partitions {
        assert_eq!(p.replicas, vec![1], "partition {id}");
        assert_eq!(p.isr, vec![1]);
        assert_eq!(p.leader, 1);
        assert_eq!(p.leader_epoch, 0);
    }
    assert_eq!(
        topic.configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
    assert_eq!(c.image().topic("orders"), Some(&topic));
    assert_eq!(c.image().topic_by_id(&topic.topic_id), Some(&topic));
    assert!(!topic.is_internal());
    assert_survives_reopen(dir.path(), &c);
}

#[test]
fn validate_only_changes_nothing_but_answers_like_the_real_thing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let before = c.image().clone();
    let dry = c.create_topic(create("x", 2, 1), true).unwrap();
    assert_eq!(c.image(), &before);
    let real = c.create_topic(create("x", 2, 1), false).unwrap();
    assert_eq!(dry.partitions, real.partitions);
    assert_eq!(dry.name, real.name);

    c.create_partitions("x", 5, true).unwrap();
    assert_eq!(c.image().topic("x").unwrap().partitions.len(), 2);
    c.alter_topic_configs("x", vec![("retention.ms".into(), Some("5".into()))], true)
        .unwrap();
    assert!(c.image().topic_configs("x").is_empty());
}

#[test]
fn every_topic_error_case() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    c.create_topic(create("a.b", 1, 1), false).unwrap();

    assert_eq!(code(c.create_topic(create("a.b", 1, 1), false)), 36);
    assert_eq!(
        code(c.create_topic(create("a_b", 1, 1), false)),
        17,
        "collides with a.b"
    );
    for bad in ["", ".", "..", "has space", "slash/no", &"x".repeat(250)] {
        assert_eq!(
            code(c.create_topic(create(bad, 1, 1), false)),
            17,
            "{bad:?}"
        );
    }
    c.create_topic(create(&"y".repeat(249), 1, 1), true)
        .unwrap();
    assert_eq!(code(c.create_topic(create("p0", 0, 1), false)), 37);
    assert_eq!(code(c.create_topic(create("p0", -2, 1), false)), 37);
    assert_eq!(code(c.create_topic(create("p0", 100_001, 1), false)), 37);
    assert_eq!(code(c.create_topic(create("r0", 1, 0), false)), 38);
    assert_eq!(
        code(c.create_topic(create("r2", 1, 2), false)),
        38,
        "one broker only"
    );

    let mut manual = create("m", -1, -1);
    manual.assignments = vec![(0, vec![1]), (2, vec![1])];
    assert_eq!(
        code(c.create_topic(manual.clone(), false)),
        39,
        "gap in partition ids"
    );
    manual.assignments = vec![(0, vec![7])];
    assert_eq!(
        code(c.create_topic(manual.clone(), false)),
        39,
        "unknown broker"
    );
    manual.assignments = vec![(0, vec![1, 1])];
    assert_eq!(
        code(c.create_topic(manual.clone(), false)),
        39,
        "duplicate broker"
    );
    manual.assignments = vec![(0, vec![])];
    assert_eq!(code(c.create_topic(manual.clone(), false)), 39, "empty");
    manual.assignments = vec![(1, vec![1]), (0, vec![1])];
    let made = c.create_topic(manual.clone(), false).unwrap();
    assert_eq!(made.partitions.len(), 2);
    let mut both = create("m2", 2, -1);
    both.assignments = vec![(0, vec![1])];
    assert_eq!(code(c.create_topic(both, false)), 42);

    let mut cfg = create("c", 1, 1);
    cfg.configs = vec![("retention.ms".into(), Some("never".into()))];
    assert_eq!(code(c.create_topic(cfg.clone(), false)), 40);
    cfg.configs = vec![("no.such".into(), Some("1".into()))];
    assert_eq!(code(c.create_topic(cfg.clone(), false)), 40);
    cfg.configs = vec![("retention.ms".into(), None)];
    assert_eq!(code(c.create_topic(cfg.clone(), false)), 40);
    cfg.configs = vec![
        ("retention.ms".into(), Some("1".into())),
        ("retention.ms".into(), Some("2".into())),
    ];
    assert_eq!(code(c.create_topic(cfg, false)), 42);

    assert_eq!(code(c.delete_topic("nope")), 3);
    assert_eq!(code(c.create_partitions("nope", 3, false)), 3);
    assert_eq!(code(c.create_partitions("a.b", 1, false)), 37, "same count");
    assert_eq!(code(c.create_partitions("a.b", 0, false)), 37, "shrink");
    assert_eq!(code(c.alter_topic_configs("nope", vec![], false)), 3);
    let bad_value = vec![("segment.bytes".into(), Some("1".into()))];
    assert_eq!(code(c.alter_topic_configs("a.b", bad_value, false)), 40);
    let unknown_delete = vec![("no.such".into(), None)];
    assert_eq!(
        code(c.alter_topic_configs("a.b", unknown_delete, false)),
        40
    );

    // Nothing above left a trace.
    let names: Vec<&str> = c.image().topics().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a.b", "m"]);
    assert_survives_reopen(dir.path(), &c);
}

#[test]
fn reopen_after_every_operation_gives_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    assert_survives_reopen(dir.path(), &c);
    let id = c.create_topic(create("t", 2, 1), false).unwrap().topic_id;
    assert_survives_reopen(dir.path(), &c);
    c.create_partitions("t", 4, false).unwrap();
    assert_eq!(
        c.image()
            .topic("t")
            .unwrap()
            .partitions
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_survives_reopen(dir.path(), &c);
    c.alter_topic_configs(
        "t",
        vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("flush.messages".into(), Some("1".into())),
        ],
        false,
    )
    .unwrap();
    assert_survives_reopen(dir.path(), &c);
    c.alter_topic_configs("t", vec![("flush.messages".into(), None)], false)
        .unwrap();
    let configs = c.image().topic_configs("t");
    assert_eq!(configs.len(), 1);
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert_survives_reopen(dir.path(), &c);
    c.create_topic(create("__consumer_offsets", 50, 1), false)
        .unwrap();
    assert!(c.image().topic("__consumer_offsets").unwrap().is_internal());
    assert_survives_reopen(dir.path(), &c);
    assert_eq!(c.delete_topic("t").unwrap(), id);
    assert!(c.image().topic("t").is_none());
    assert!(c.image().topic_by_id(&id).is_none());
    assert_survives_reopen(dir.path(), &c);
    c.snapshot().unwrap();
    assert_survives_reopen(dir.path(), &c);
    c.create_topic(create("t", 1, 1), false).unwrap();
    assert_ne!(
        c.image().topic("t").unwrap().topic_id,
        id,
        "a recreated topic gets a new id"
    );
    assert_survives_reopen(dir.path(), &c);
}

#[test]
fn broker_registration_is_durable_and_bumps_the_epoch_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let first = c.image().broker(1).unwrap().clone();
    assert_eq!(first.listeners[0].port, 9092);
    assert_eq!(c.image().brokers().count(), 1);
    drop(c);
    let c = open(dir.path());
    let second = c.image().broker(1).unwrap();
    assert!(second.epoch > first.epoch);
    assert_ne!(second.incarnation, first.incarnation);
}

#[test]
fn registering_the_same_endpoints_twice_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let offset = c.image().last_offset();
    let listeners = c.image().broker(1).unwrap().listeners.clone();
    c.register_broker(listeners, None).unwrap();
    assert_eq!(c.image().last_offset(), offset);
}

#[test]
fn producer_ids_are_never_reused_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..3 {
        let mut c = open(dir.path());
        for _ in 0..1500 {
            let id = c.allocate_producer_id().unwrap();
            assert!(id >= 0);
            assert!(seen.insert(id), "id {id} reused in round {round}");
        }
    }
    assert_eq!(seen.len(), 4500);
}

#[test]
fn partitions_are_spread_over_brokers_when_there_are_several() {
    let dir = tempfile::tempdir().unwrap();
    // Other brokers register through the log as a Raft follower would replay them.
    let (mut log, _) = tidelog_controller::MetadataLog::open(dir.path()).unwrap();
    for id in [2, 3] {
        log.append(&[tidelog_controller::MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation: tidelog_controller::Uuid::from_u128(id as u128),
            epoch: 0,
            listeners: vec![],
            rack: None,
        }])
        .unwrap();
    }
    drop(log);
    let mut c = open(dir.path());
    let topic = c.create_topic(create("spread", 6, 3), false).unwrap();
    let mut leaders: Vec<i32> = topic.partitions.values().map(|p| p.leader).collect();
    leaders.sort_unstable();
    assert_eq!(leaders, [1, 1, 2, 2, 3, 3]);
    for p in topic.partitions.values() {
        let mut r = p.replicas.clone();
        r.sort_unstable();
        assert_eq!(r, [1, 2, 3]);
    }
    let code = c
        .create_topic(create("too-many", 1, 4), false)
        .unwrap_err()
        .error_code();
    assert_eq!(code, 38);
}

#[test]
fn periodic_snapshot_on_disk_keeps_the_log_short_and_the_image_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let partitions = i32::try_from(tidelog_controller::SNAPSHOT_EVERY_RECORDS).unwrap();
    c.create_topic(create("big", partitions, 1), false).unwrap();
    assert!(dir.path().join("metadata.snapshot").exists());
    c.create_topic(create("after", 1, 1), false).unwrap();
    let logs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(logs.len(), 1, "covered segments deleted: {logs:?}");
    assert_survives_reopen(dir.path(), &c);
}

#[test]
fn a_directory_belongs_to_one_node_id() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let err = Controller::open(dir.path(), 2, DEFAULTS).unwrap_err();
    assert!(
        matches!(
            err,
            tidelog_controller::ControllerError::NodeIdMismatch {
                stored: 1,
                configured: 2
            }
        ),
        "{err}"
    );
    assert!(Controller::open(dir.path(), 1, DEFAULTS).is_ok());
}

#[test]
fn open_creates_missing_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("data").join("__cluster_metadata");
    let c = open(&nested);
    assert_eq!(c.image().cluster_id().len(), 22);
    assert!(nested.join("meta.properties").exists());
}
