//! Random sequences of controller operations on a single node's one-voter quorum
//! against a simple model: after every step, the image matches the model, and a
//! restarted controller (replaying its Raft log from its latest snapshot) matches the
//! image.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod single_voter;

use std::collections::BTreeMap;

use proptest::prelude::*;
use single_voter::SingleVoter;
use tidelog_controller::CreateTopic;

#[derive(Debug, Clone)]
enum Op {
    Create { topic: u8, partitions: i32 },
    Delete { topic: u8 },
    Grow { topic: u8, by: i32 },
    SetConfig { topic: u8, retention: Option<u16> },
    Restart,
    ProducerIds,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8, 1..5i32).prop_map(|(topic, partitions)| Op::Create { topic, partitions }),
        (0..4u8).prop_map(|topic| Op::Delete { topic }),
        (0..4u8, 1..3i32).prop_map(|(topic, by)| Op::Grow { topic, by }),
        (0..4u8, proptest::option::of(0..1000u16))
            .prop_map(|(topic, retention)| Op::SetConfig { topic, retention }),
        Just(Op::Restart),
        Just(Op::ProducerIds),
    ]
}

/// topic name -> (partition count, retention.ms override)
type Model = BTreeMap<String, (i32, Option<String>)>;

async fn open(dir: &std::path::Path) -> SingleVoter {
    // Snapshots every few entries, so restarts replay from snapshots too.
    let voter = SingleVoter::open_tuned(dir, 1, |c| {
        c.snapshot_every_entries = 4;
        c.entries_kept_after_snapshot = 1;
    })
    .await
    .unwrap();
    voter.register(tidelog_controller::Uuid::new_v4()).await;
    voter
}

fn modelled(c: &SingleVoter) -> Model {
    c.image()
        .topics()
        .map(|t| {
            (
                t.name.clone(),
                (t.partition_count(), t.configs.get("retention.ms").cloned()),
            )
        })
        .collect()
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path()).await;
    let mut model = Model::new();
    let mut last_pid = -1;
    for op in ops {
        match op {
            Op::Create { topic, partitions } => {
                let name = format!("t{topic}");
                let req = CreateTopic {
                    name: name.clone(),
                    num_partitions: partitions,
                    replication_factor: 1,
                    assignments: vec![],
                    configs: vec![],
                };
                let result = c.create(req).await;
                prop_assert_eq!(result.is_ok(), !model.contains_key(&name));
                model.entry(name).or_insert((partitions, None));
            }
            Op::Delete { topic } => {
                let name = format!("t{topic}");
                let result = c.controller.delete_topic(&name).await;
                prop_assert_eq!(result.is_ok(), model.remove(&name).is_some());
            }
            Op::Grow { topic, by } => {
                let name = format!("t{topic}");
                let current = model.get(&name).map_or(1, |m| m.0);
                let result = c
                    .controller
                    .create_partitions(&name, current + by, false)
                    .await;
                prop_assert_eq!(result.is_ok(), model.contains_key(&name));
                if let Some(m) = model.get_mut(&name) {
                    m.0 += by;
                }
            }
            Op::SetConfig { topic, retention } => {
                let name = format!("t{topic}");
                let value = retention.map(|r| r.to_string());
                let change = vec![("retention.ms".into(), value.clone())];
                let result = c.controller.alter_topic_configs(&name, change, false).await;
                prop_assert_eq!(result.is_ok(), model.contains_key(&name));
                if let Some(m) = model.get_mut(&name) {
                    m.1 = value;
                }
            }
            Op::Restart => {
                let image = c.image();
                c = c.restart().await;
                prop_assert_eq!(&*c.image(), &*image);
                c.register(tidelog_controller::Uuid::new_v4()).await;
            }
            Op::ProducerIds => {
                let epoch = c.image().broker(1).map_or(-1, |b| b.epoch);
                let block = c.controller.allocate_producer_ids(1, epoch).await.unwrap();
                prop_assert!(block.start > last_pid);
                last_pid = block.end - 1;
            }
        }
        prop_assert_eq!(&modelled(&c), &model);
    }
    let image = c.image();
    let c = c.restart().await;
    prop_assert_eq!(&*c.image(), &*image);
    c.stop().await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn image_follows_the_model_and_survives_restart(ops in proptest::collection::vec(op(), 1..30)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops))?;
    }
}
