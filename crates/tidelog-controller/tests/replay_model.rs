//! Random sequences of controller operations against a simple model: after every
//! step, the image matches the model, and a reopened controller matches the image.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;

use proptest::prelude::*;
use tidelog_controller::{Controller, CreateTopic, Endpoint, TopicDefaults};

#[derive(Debug, Clone)]
enum Op {
    Create { topic: u8, partitions: i32 },
    Delete { topic: u8 },
    Grow { topic: u8, by: i32 },
    SetConfig { topic: u8, retention: Option<u16> },
    Snapshot,
    Reopen,
    ProducerId,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8, 1..5i32).prop_map(|(topic, partitions)| Op::Create { topic, partitions }),
        (0..4u8).prop_map(|topic| Op::Delete { topic }),
        (0..4u8, 1..3i32).prop_map(|(topic, by)| Op::Grow { topic, by }),
        (0..4u8, proptest::option::of(0..1000u16))
            .prop_map(|(topic, retention)| Op::SetConfig { topic, retention }),
        Just(Op::Snapshot),
        Just(Op::Reopen),
        Just(Op::ProducerId),
    ]
}

/// topic name -> (partition count, retention.ms override)
type Model = BTreeMap<String, (i32, Option<String>)>;

fn open(dir: &std::path::Path) -> Controller {
    let mut c = Controller::open(dir, 1, TopicDefaults::default()).unwrap();
    let listener = Endpoint {
        name: "PLAINTEXT".into(),
        host: "localhost".into(),
        port: 9092,
    };
    c.register_broker(vec![listener], None).unwrap();
    c
}

fn check(c: &Controller, model: &Model) {
    let actual: Model = c
        .image()
        .topics()
        .map(|t| {
            (
                t.name.clone(),
                (t.partition_count(), t.configs.get("retention.ms").cloned()),
            )
        })
        .collect();
    assert_eq!(&actual, model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn image_follows_the_model_and_survives_reopen(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let mut model = Model::new();
        let mut last_pid = -1;
        for op in ops {
            match op {
                Op::Create { topic, partitions } => {
                    let name = format!("t{topic}");
                    let req = CreateTopic { name: name.clone(), num_partitions: partitions, replication_factor: 1, assignments: vec![], configs: vec![] };
                    let result = c.create_topic(req, false);
                    prop_assert_eq!(result.is_ok(), !model.contains_key(&name));
                    model.entry(name).or_insert((partitions, None));
                }
                Op::Delete { topic } => {
                    let name = format!("t{topic}");
                    prop_assert_eq!(c.delete_topic(&name).is_ok(), model.remove(&name).is_some());
                }
                Op::Grow { topic, by } => {
                    let name = format!("t{topic}");
                    let current = model.get(&name).map_or(1, |m| m.0);
                    let result = c.create_partitions(&name, current + by, false);
                    prop_assert_eq!(result.is_ok(), model.contains_key(&name));
                    if let Some(m) = model.get_mut(&name) { m.0 += by; }
                }
                Op::SetConfig { topic, retention } => {
                    let name = format!("t{topic}");
                    let value = retention.map(|r| r.to_string());
                    let result = c.alter_topic_configs(&name, vec![("retention.ms".into(), value.clone())], false);
                    prop_assert_eq!(result.is_ok(), model.contains_key(&name));
                    if let Some(m) = model.get_mut(&name) { m.1 = value; }
                }
                Op::Snapshot => c.snapshot().unwrap(),
                Op::Reopen => {
                    let image = c.image().clone();
                    drop(c);
                    c = open(dir.path());
                    // Re-registration is the only change a restart makes.
                    let mut reopened = c.image().clone();
                    prop_assert_eq!(reopened.topics().collect::<Vec<_>>(), image.topics().collect::<Vec<_>>());
                    prop_assert!(reopened.next_producer_id() == image.next_producer_id());
                    reopened = Controller::open(dir.path(), 1, TopicDefaults::default()).unwrap().image().clone();
                    prop_assert_eq!(&reopened, c.image());
                }
                Op::ProducerId => {
                    let id = c.allocate_producer_id().unwrap();
                    prop_assert!(id > last_pid);
                    last_pid = id;
                }
            }
            check(&c, &model);
        }
        let reopened = Controller::open(dir.path(), 1, TopicDefaults::default()).unwrap();
        prop_assert_eq!(reopened.image(), c.image());
    }
}
