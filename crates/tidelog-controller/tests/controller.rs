//! The controller of a single node (its one-voter quorum): topic requests, their
//! errors, durability across restarts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod single_voter;

use single_voter::{code, create, endpoint, SingleVoter};
use tidelog_controller::quorum::{ElectionKind, QuorumError, RequestError};
use tidelog_controller::{ControllerError, Uuid};

/// Asserts a restarted controller sees exactly the same image; returns it.
async fn assert_survives_restart(c: SingleVoter) -> SingleVoter {
    let before = c.image();
    let c = c.restart().await;
    assert_eq!(*c.image(), *before);
    c
}

#[tokio::test]
async fn create_topic_with_defaults_and_configs() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    let mut req = create("orders", -1, -1);
    req.configs = vec![("retention.ms".into(), Some("1000".into()))];
    let topic = c.create(req).await.unwrap();
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
    assert_survives_restart(c).await.stop().await;
}

#[tokio::test]
async fn validate_only_changes_nothing_but_answers_like_the_real_thing() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    let before = c.image();
    let dry = c
        .controller
        .create_topic(create("x", 2, 1), true)
        .await
        .unwrap();
    assert_eq!(*c.image(), *before);
    let real = c.create(create("x", 2, 1)).await.unwrap();
    assert_eq!(dry.partitions, real.partitions);
    assert_eq!(dry.name, real.name);

    c.controller.create_partitions("x", 5, true).await.unwrap();
    assert_eq!(c.image().topic("x").unwrap().partitions.len(), 2);
    let change = vec![("retention.ms".into(), Some("5".into()))];
    c.controller
        .alter_topic_configs("x", change, true)
        .await
        .unwrap();
    assert!(c.image().topic_configs("x").is_empty());
    c.stop().await;
}

#[tokio::test]
async fn every_topic_error_case() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    c.create(create("a.b", 1, 1)).await.unwrap();

    assert_eq!(code(c.create(create("a.b", 1, 1)).await), 36);
    assert_eq!(
        code(c.create(create("a_b", 1, 1)).await),
        17,
        "collides with a.b"
    );
    for bad in ["", ".", "..", "has space", "slash/no", &"x".repeat(250)] {
        assert_eq!(code(c.create(create(bad, 1, 1)).await), 17, "{bad:?}");
    }
    c.controller
        .create_topic(create(&"y".repeat(249), 1, 1), true)
        .await
        .unwrap();
    assert_eq!(code(c.create(create("p0", 0, 1)).await), 37);
    assert_eq!(code(c.create(create("p0", -2, 1)).await), 37);
    assert_eq!(code(c.create(create("p0", 100_001, 1)).await), 37);
    assert_eq!(code(c.create(create("r0", 1, 0)).await), 38);
    assert_eq!(
        code(c.create(create("r2", 1, 2)).await),
        38,
        "one broker only"
    );

    let mut manual = create("m", -1, -1);
    manual.assignments = vec![(0, vec![1]), (2, vec![1])];
    assert_eq!(
        code(c.create(manual.clone()).await),
        39,
        "gap in partition ids"
    );
    manual.assignments = vec![(0, vec![7])];
    assert_eq!(code(c.create(manual.clone()).await), 39, "unknown broker");
    manual.assignments = vec![(0, vec![1, 1])];
    assert_eq!(code(c.create(manual.clone()).await), 39, "duplicate broker");
    manual.assignments = vec![(0, vec![])];
    assert_eq!(code(c.create(manual.clone()).await), 39, "empty");
    manual.assignments = vec![(1, vec![1]), (0, vec![1])];
    let made = c.create(manual.clone()).await.unwrap();
    assert_eq!(made.partitions.len(), 2);
    let mut both = create("m2", 2, -1);
    both.assignments = vec![(0, vec![1])];
    assert_eq!(code(c.create(both).await), 42);

    let mut cfg = create("c", 1, 1);
    cfg.configs = vec![("retention.ms".into(), Some("never".into()))];
    assert_eq!(code(c.create(cfg.clone()).await), 40);
    cfg.configs = vec![("no.such".into(), Some("1".into()))];
    assert_eq!(code(c.create(cfg.clone()).await), 40);
    cfg.configs = vec![("retention.ms".into(), None)];
    assert_eq!(code(c.create(cfg.clone()).await), 40);
    cfg.configs = vec![
        ("retention.ms".into(), Some("1".into())),
        ("retention.ms".into(), Some("2".into())),
    ];
    assert_eq!(code(c.create(cfg).await), 42);

    let ctl = &c.controller;
    assert_eq!(code(ctl.delete_topic("nope").await), 3);
    assert_eq!(code(ctl.create_partitions("nope", 3, false).await), 3);
    assert_eq!(
        code(ctl.create_partitions("a.b", 1, false).await),
        37,
        "same count"
    );
    assert_eq!(
        code(ctl.create_partitions("a.b", 0, false).await),
        37,
        "shrink"
    );
    assert_eq!(
        code(ctl.alter_topic_configs("nope", vec![], false).await),
        3
    );
    let bad_value = vec![("segment.bytes".into(), Some("1".into()))];
    assert_eq!(
        code(ctl.alter_topic_configs("a.b", bad_value, false).await),
        40
    );
    let unknown_delete = vec![("no.such".into(), None)];
    assert_eq!(
        code(ctl.alter_topic_configs("a.b", unknown_delete, false).await),
        40
    );

    // Nothing above left a trace.
    let names: Vec<String> = c.image().topics().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["a.b", "m"]);
    assert_survives_restart(c).await.stop().await;
}

#[tokio::test]
async fn restart_after_every_operation_gives_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = SingleVoter::open(dir.path()).await;
    c = assert_survives_restart(c).await;
    let id = c.create(create("t", 2, 1)).await.unwrap().topic_id;
    c = assert_survives_restart(c).await;
    c.controller.create_partitions("t", 4, false).await.unwrap();
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
    c = assert_survives_restart(c).await;
    let set = vec![
        ("cleanup.policy".into(), Some("compact".into())),
        ("flush.messages".into(), Some("1".into())),
    ];
    c.controller
        .alter_topic_configs("t", set, false)
        .await
        .unwrap();
    c = assert_survives_restart(c).await;
    let unset = vec![("flush.messages".into(), None)];
    c.controller
        .alter_topic_configs("t", unset, false)
        .await
        .unwrap();
    let configs = c.image().topic_configs("t");
    assert_eq!(configs.len(), 1);
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    c = assert_survives_restart(c).await;
    // A client may not create an internal topic; the broker's own path may.
    assert_eq!(
        code(c.create(create("__consumer_offsets", 50, 1)).await),
        42
    );
    let mut offsets = create("__consumer_offsets", 50, 1);
    offsets.configs = vec![("cleanup.policy".into(), Some("compact".into()))];
    c.controller.create_internal_topic(offsets).await.unwrap();
    assert!(c.image().topic("__consumer_offsets").unwrap().is_internal());
    assert_eq!(
        code(c.controller.delete_topic("__consumer_offsets").await),
        42
    );
    assert_eq!(
        code(
            c.controller
                .create_partitions("__consumer_offsets", 51, false)
                .await
        ),
        42
    );
    let delete_policy = vec![("cleanup.policy".to_owned(), Some("delete".to_owned()))];
    assert_eq!(
        code(
            c.controller
                .alter_topic_configs("__consumer_offsets", delete_policy, false)
                .await
        ),
        40
    );
    c = assert_survives_restart(c).await;
    assert_eq!(c.controller.delete_topic("t").await.unwrap(), id);
    assert!(c.image().topic("t").is_none());
    assert!(c.image().topic_by_id(&id).is_none());
    c = assert_survives_restart(c).await;
    c.create(create("t", 1, 1)).await.unwrap();
    assert_ne!(
        c.image().topic("t").unwrap().topic_id,
        id,
        "a recreated topic gets a new id"
    );
    assert_survives_restart(c).await.stop().await;
}

#[tokio::test]
async fn broker_registration_is_durable_and_bumps_the_epoch_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    let first = c.image().broker(1).unwrap().clone();
    assert_eq!(first.listeners[0].port, 9092);
    assert_eq!(c.image().brokers().count(), 1);
    let c = c.restart().await;
    assert_eq!(c.image().broker(1), Some(&first), "kept across the restart");
    c.register(Uuid::new_v4()).await;
    let second = c.image().broker(1).unwrap().clone();
    assert!(second.epoch > first.epoch);
    assert_ne!(second.incarnation, first.incarnation);
    c.stop().await;
}

#[tokio::test]
async fn registering_the_same_endpoints_twice_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    let offset = c.image().last_offset();
    let broker = c.image().broker(1).unwrap().clone();
    let again = c
        .controller
        .register_broker(1, broker.incarnation, broker.listeners.clone(), None)
        .await
        .unwrap();
    assert_eq!(again, broker.epoch);
    assert_eq!(c.image().last_offset(), offset);
    c.stop().await;
}

#[tokio::test]
async fn producer_ids_are_never_reused_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..3 {
        let c = SingleVoter::open(dir.path()).await;
        let epoch = c.image().broker(1).unwrap().epoch;
        for _ in 0..3 {
            let block = c.controller.allocate_producer_ids(1, epoch).await.unwrap();
            assert!(block.start >= 0 && !block.is_empty());
            for id in block {
                assert!(seen.insert(id), "id {id} reused in round {round}");
            }
        }
        c.stop().await;
    }
    assert!(seen.len() >= 9, "{}", seen.len());
}

#[tokio::test]
async fn partitions_are_spread_over_brokers_when_there_are_several() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    for id in [2, 3] {
        let incarnation = Uuid::from_u128(u128::try_from(id).unwrap());
        c.controller
            .register_broker(id, incarnation, endpoint(9092 + id as u16), None)
            .await
            .unwrap();
    }
    let topic = c.create(create("spread", 6, 3)).await.unwrap();
    let mut leaders: Vec<i32> = topic.partitions.values().map(|p| p.leader).collect();
    leaders.sort_unstable();
    assert_eq!(leaders, [1, 1, 2, 2, 3, 3]);
    for p in topic.partitions.values() {
        let mut r = p.replicas.clone();
        r.sort_unstable();
        assert_eq!(r, [1, 2, 3]);
    }
    assert_eq!(code(c.create(create("too-many", 1, 4)).await), 38);
    c.stop().await;
}

#[tokio::test]
async fn a_directory_belongs_to_one_node_id() {
    let dir = tempfile::tempdir().unwrap();
    SingleVoter::open(dir.path()).await.stop().await;
    let Err(err) = SingleVoter::open_as(dir.path(), 2).await else {
        panic!("node 2 started on node 1's directory");
    };
    assert!(
        matches!(
            err,
            QuorumError::Storage(ControllerError::NodeIdMismatch {
                stored: 1,
                configured: 2
            })
        ),
        "{err}"
    );
    SingleVoter::open(dir.path()).await.stop().await;
}

#[tokio::test]
async fn open_creates_missing_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("data").join("deeper");
    let c = SingleVoter::open(&nested).await;
    assert_eq!(c.image().cluster_id().len(), 22);
    assert!(nested.join("__cluster_metadata/meta.properties").exists());
    c.stop().await;
}

#[tokio::test]
async fn a_single_node_never_needs_an_election() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    c.create(create("orders", 2, 1)).await.unwrap();
    let asked = vec![("orders".to_owned(), 0), ("orders".to_owned(), 1)];
    for kind in [ElectionKind::Preferred, ElectionKind::Unclean] {
        let outcomes = c
            .controller
            .elect_leaders(kind, Some(asked.clone()))
            .await
            .unwrap();
        let codes: Vec<i16> = outcomes
            .iter()
            .map(|(_, o)| o.as_ref().map_or_else(RequestError::error_code, |()| 0))
            .collect();
        assert_eq!(codes, vec![84, 84], "{kind:?}: ELECTION_NOT_NEEDED");
    }
    c.stop().await;
}

#[tokio::test]
async fn a_single_node_accepts_only_the_current_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    c.create(create("orders", 1, 1)).await.unwrap();
    let outcome = |replicas: Option<Vec<i32>>| {
        let controller = std::sync::Arc::clone(&c.controller);
        async move {
            let outcomes = controller
                .alter_reassignments(vec![("orders".into(), 0, replicas)])
                .await
                .unwrap();
            outcomes[0].1.as_ref().err().map(RequestError::error_code)
        }
    };
    assert_eq!(outcome(Some(vec![1])).await, None, "already there");
    assert_eq!(outcome(Some(vec![2])).await, Some(39), "no broker 2");
    assert_eq!(outcome(None).await, Some(85), "nothing to cancel");
    c.stop().await;
}

#[tokio::test]
async fn a_single_node_leads_its_own_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let c = SingleVoter::open(dir.path()).await;
    let status = c.controller.describe_quorum().await.unwrap();
    assert_eq!(status.leader, Some(1));
    assert_eq!(status.voters.len(), 1);
    assert_eq!(status.voters[0].node_id, 1);
    assert_eq!(status.voters[0].lag, Some(0));
    c.stop().await;
}
