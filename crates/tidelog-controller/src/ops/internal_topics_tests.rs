//! The internal topics' protection as every planner enforces it.

use uuid::Uuid;

use super::test_support::Images;
use super::{
    is_protected, plan_alter_topic_configs, plan_create_internal_topic, plan_create_partitions,
    plan_create_topic, plan_delete_topic, CreateTopic, TopicDefaults,
};
use crate::error::TopicError;
use crate::image::MetadataImage;

const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const PROTECTED: [&str; 4] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__cluster_metadata",
];

/// One broker; every protected name that can be a topic exists with the settings its
/// coordinator creates it with, and so does an ordinary topic.
fn images() -> Images {
    Images::new()
        .brokers(&[1])
        .topic("__consumer_offsets", &[(&[1], &[1], 1)])
        .topic_config("__consumer_offsets", "cleanup.policy", "compact")
        .topic("__transaction_state", &[(&[1], &[1], 1)])
        .topic_config("__transaction_state", "cleanup.policy", "compact")
        .topic("__share_group_state", &[(&[1], &[1], 1)])
        .topic_config("__share_group_state", "cleanup.policy", "delete")
        .topic("orders", &[(&[1], &[1], 1)])
}

fn request(name: &str, configs: &[(&str, Option<&str>)]) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: 3,
        replication_factor: 1,
        assignments: vec![],
        configs: configs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect(),
    }
}

fn client_create(image: &MetadataImage, req: &CreateTopic) -> Result<(), TopicError> {
    plan_create_topic(image, req, TopicDefaults::default(), Uuid::from_u128(7), 0).map(|_| ())
}

fn internal_create(image: &MetadataImage, req: &CreateTopic) -> Result<(), TopicError> {
    plan_create_internal_topic(image, req, TopicDefaults::default(), Uuid::from_u128(7), 0)
        .map(|_| ())
}

fn set(key: &str, value: Option<&str>) -> Vec<(String, Option<String>)> {
    vec![(key.to_owned(), value.map(str::to_owned))]
}

#[test]
fn the_protected_names_are_kafkas_internal_topics_and_the_metadata_log() {
    for name in PROTECTED {
        assert!(is_protected(name), "{name}");
    }
    for name in [
        "orders",
        "__consumer_offsets2",
        "_consumer_offsets",
        "__connect-offsets",
    ] {
        assert!(!is_protected(name), "{name}");
    }
}

#[test]
fn internal_topics_cannot_be_deleted() {
    let images = images();
    for name in PROTECTED {
        let err = plan_delete_topic(&images.image, name).unwrap_err();
        assert_eq!(err.error_code(), INVALID_REQUEST, "{name}: {err}");
        let message = err.to_string();
        assert!(
            message.contains("Deletion of internal topic") && message.contains(name),
            "{message}"
        );
    }
    assert!(plan_delete_topic(&images.image, "__consumer_offsets")
        .unwrap_err()
        .to_string()
        .contains("committed offsets"));
    assert!(plan_delete_topic(&images.image, "orders").is_ok());
}

#[test]
fn a_client_cannot_create_internal_topics_even_before_the_broker_does() {
    let empty = Images::new().brokers(&[1]);
    for name in PROTECTED {
        let req = request(name, &[("cleanup.policy", Some("compact"))]);
        let err = client_create(&empty.image, &req).unwrap_err();
        assert_eq!(err.error_code(), INVALID_REQUEST, "{name}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("Creation of internal topic {name} is prohibited")),
            "{err}"
        );
    }
    // Where the topic exists the answer is the same refusal, not TOPIC_ALREADY_EXISTS.
    let err = client_create(&images().image, &request("__consumer_offsets", &[])).unwrap_err();
    assert_eq!(err.error_code(), INVALID_REQUEST);
    assert!(client_create(&empty.image, &request("orders", &[])).is_ok());
}

#[test]
fn the_broker_creates_coordinator_topics_only_with_their_cleanup_policy() {
    let empty = Images::new().brokers(&[1]);
    let compact = [("cleanup.policy", Some("compact"))];
    internal_create(&empty.image, &request("__consumer_offsets", &compact)).unwrap();
    internal_create(&empty.image, &request("__transaction_state", &compact)).unwrap();
    internal_create(
        &empty.image,
        &request("__share_group_state", &[("cleanup.policy", Some("delete"))]),
    )
    .unwrap();
    for configs in [
        &[][..],
        &[("cleanup.policy", Some("delete"))][..],
        &[("cleanup.policy", Some("compact,delete"))][..],
    ] {
        let err =
            internal_create(&empty.image, &request("__consumer_offsets", configs)).unwrap_err();
        assert_eq!(err.error_code(), INVALID_CONFIG, "{configs:?}: {err}");
    }
    for name in ["orders", "__cluster_metadata"] {
        let err = internal_create(&empty.image, &request(name, &compact)).unwrap_err();
        assert_eq!(err.error_code(), INVALID_REQUEST, "{name}: {err}");
    }
    // The usual rules still hold on this path.
    let err =
        internal_create(&images().image, &request("__consumer_offsets", &compact)).unwrap_err();
    assert!(matches!(err, TopicError::TopicAlreadyExists), "{err}");
}

#[test]
fn internal_topics_keep_their_partition_count() {
    let images = images();
    for name in [
        "__consumer_offsets",
        "__transaction_state",
        "__share_group_state",
    ] {
        let err = plan_create_partitions(&images.image, name, 2, 0).unwrap_err();
        assert_eq!(err.error_code(), INVALID_REQUEST, "{name}: {err}");
        assert!(err.to_string().contains("Adding partitions"), "{err}");
    }
    assert!(plan_create_partitions(&images.image, "orders", 2, 0).is_ok());
}

#[test]
fn internal_topics_keep_the_cleanup_policy_their_coordinator_needs() {
    let image = images().image;
    for value in [
        Some("delete"),
        Some("compact,delete"),
        Some("delete,compact"),
        None,
    ] {
        let err =
            plan_alter_topic_configs(&image, "__consumer_offsets", &set("cleanup.policy", value))
                .unwrap_err();
        assert_eq!(err.error_code(), INVALID_CONFIG, "{value:?}: {err}");
        assert!(err.to_string().contains("__consumer_offsets"), "{err}");
    }
    let err = plan_alter_topic_configs(
        &image,
        "__transaction_state",
        &set("cleanup.policy", Some("delete")),
    )
    .unwrap_err();
    assert_eq!(err.error_code(), INVALID_CONFIG);
    let err = plan_alter_topic_configs(
        &image,
        "__share_group_state",
        &set("cleanup.policy", Some("compact")),
    )
    .unwrap_err();
    assert_eq!(err.error_code(), INVALID_CONFIG);
    // One refused entry refuses the whole change.
    let mixed = vec![
        ("retention.ms".to_owned(), Some("1000".to_owned())),
        ("cleanup.policy".to_owned(), Some("delete".to_owned())),
    ];
    assert!(plan_alter_topic_configs(&image, "__consumer_offsets", &mixed).is_err());

    // Settings that do not break the coordinator stay the operator's.
    let same = plan_alter_topic_configs(
        &image,
        "__consumer_offsets",
        &set("cleanup.policy", Some("compact")),
    )
    .unwrap();
    assert!(same.records.is_empty(), "no change, no record");
    let plan = plan_alter_topic_configs(
        &image,
        "__consumer_offsets",
        &set("segment.bytes", Some("1048576")),
    )
    .unwrap();
    assert_eq!(plan.records.len(), 1);
    assert!(
        plan_alter_topic_configs(&image, "orders", &set("cleanup.policy", Some("compact"))).is_ok()
    );
}
