//! Request handlers as pure functions: current image in, `(records, response)` out.
//! Nothing here changes state; the caller appends the records and replays them. The
//! single-node [`crate::Controller`] and a future Raft controller share these.

mod acls;
mod alter_partition;
mod balance;
mod create_topic;
mod election;
mod internal_topics;
#[cfg(test)]
mod internal_topics_tests;
mod partition;
#[cfg(test)]
mod placement_tests;
mod reassign;
#[cfg(test)]
mod test_support;

use std::ops::Range;

use uuid::Uuid;

pub use acls::{plan_create_acls, plan_delete_acls};
pub use alter_partition::plan_alter_partition;
pub use balance::{assignment_of, plan_balanced_assignment, Assignment};
use create_topic::{
    checked_replication_factor, live_brokers, new_partition_record, plan_new_topic,
};
pub use create_topic::{plan_create_topic, validate_topic_name, CreateTopic, TopicDefaults};
pub use election::{
    imbalanced_partitions, plan_controlled_shutdown, plan_elect_leaders, plan_leader_repairs,
};
pub use internal_topics::{is_protected, plan_create_internal_topic, METADATA_TOPIC};
pub use partition::{
    image_with, AlterPartition, ElectionKind, PartitionError, PartitionResults, Reassignment,
    TopicPartition, UncleanDefault, UNCLEAN_LEADER_ELECTION,
};
pub use reassign::{list_reassignments, plan_alter_reassignments};

use crate::error::{ControllerError, TopicError};
use crate::image::MetadataImage;
use crate::placement::place;
use crate::record::{ConfigResource, Endpoint, MetadataRecord};
use crate::topic_config;

/// Most partitions one topic may have; keeps one creation within one log frame.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;
/// Longest topic name Kafka allows.
pub const MAX_TOPIC_NAME_LEN: usize = 249;
/// Producer ids are handed to a broker in blocks of this size.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The records a request produces and the answer to give once they are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<T> {
    pub records: Vec<MetadataRecord>,
    pub response: T,
}

/// Deletes a topic (not an internal one).
pub fn plan_delete_topic(image: &MetadataImage, name: &str) -> Result<Plan<Uuid>, TopicError> {
    internal_topics::check_delete(name)?;
    let topic = image
        .topic(name)
        .ok_or(TopicError::UnknownTopicOrPartition)?;
    Ok(Plan {
        records: vec![MetadataRecord::RemoveTopic {
            topic_id: topic.topic_id,
        }],
        response: topic.topic_id,
    })
}

/// Grows `name` to `new_total` partitions, placing the new ones round-robin with the
/// replication factor of the existing ones. Internal topics keep their count.
pub fn plan_create_partitions(
    image: &MetadataImage,
    name: &str,
    new_total: i32,
    placement_start: usize,
) -> Result<Plan<()>, TopicError> {
    internal_topics::check_create_partitions(name)?;
    let topic = image
        .topic(name)
        .ok_or(TopicError::UnknownTopicOrPartition)?;
    let current = topic.partition_count();
    if new_total == current {
        return Err(TopicError::InvalidPartitions(format!(
            "Topic already has {current} partitions."
        )));
    }
    if new_total < current {
        return Err(TopicError::InvalidPartitions(format!(
            "The topic {name} currently has {current} partition(s); {new_total} would not be an increase."
        )));
    }
    if new_total > MAX_PARTITIONS_PER_TOPIC {
        return Err(TopicError::InvalidPartitions(format!(
            "Number of partitions {new_total} exceeds the limit of {MAX_PARTITIONS_PER_TOPIC}."
        )));
    }
    let existing_rf = topic
        .partitions
        .values()
        .next()
        .map_or(1, |p| p.target_replicas().len());
    let brokers = live_brokers(image);
    let rf = checked_replication_factor(
        i16::try_from(existing_rf).unwrap_or(i16::MAX),
        brokers.len(),
    )?;
    let count = usize::try_from(new_total - current).unwrap_or(0);
    let start = placement_start.wrapping_add(usize::try_from(current).unwrap_or(0));
    let records = (current..new_total)
        .zip(place(&brokers, count, rf, start))
        .map(|(partition, replicas)| new_partition_record(topic.topic_id, partition, &replicas))
        .collect();
    Ok(Plan {
        records,
        response: (),
    })
}

/// Incremental config change of a topic: `Some` sets, `None` deletes (back to the
/// default). Produces records only for entries that actually change. Internal topics
/// keep the settings their coordinators depend on.
pub fn plan_alter_topic_configs(
    image: &MetadataImage,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<Plan<()>, TopicError> {
    let topic = image
        .topic(name)
        .ok_or(TopicError::UnknownTopicOrPartition)?;
    internal_topics::check_config_changes(name, changes)?;
    let mut records = Vec::new();
    for (i, (key, value)) in changes.iter().enumerate() {
        if changes[..i].iter().any(|(k, _)| k == key) {
            return Err(TopicError::InvalidRequest(format!(
                "Duplicate config name {key}"
            )));
        }
        match value {
            Some(v) => topic_config::validate(key, v)?,
            None if topic_config::find(key).is_none() => {
                return Err(TopicError::InvalidConfig(format!(
                    "Unknown topic config name: {key}"
                )));
            }
            None => {}
        }
        if topic.configs.get(key) != value.as_ref() {
            records.push(MetadataRecord::Config {
                resource: ConfigResource::Topic(name.to_owned()),
                name: key.clone(),
                value: value.clone(),
            });
        }
    }
    Ok(Plan {
        records,
        response: (),
    })
}

/// Groups that may carry dynamic configs at once: group ids are client input, and
/// every node holds each group's configs in its image.
pub const MAX_GROUPS_WITH_CONFIGS: usize = 100_000;

/// Change of a BROKER resource's dynamic configs (KIP-226): one broker's
/// (`ConfigResource::Broker`) or the cluster default (`ConfigResource::Cluster`);
/// or of a GROUP resource's (`ConfigResource::Group`, KIP-848).
/// `Some` sets, `None` deletes. The values were validated by the broker that took the
/// request, as Kafka's `ConfigAdminManager` validates broker configs before
/// forwarding; the controller checks only what needs the image (the broker exists)
/// and writes records for the entries that actually change.
pub fn plan_alter_broker_configs(
    image: &MetadataImage,
    resource: &ConfigResource,
    changes: &[(String, Option<String>)],
) -> Result<Plan<()>, TopicError> {
    let current = match resource {
        ConfigResource::Topic(_) => {
            return Err(TopicError::InvalidRequest(
                "topic configs are altered with AlterTopicConfigs".into(),
            ))
        }
        ConfigResource::Broker(id) => image.broker_configs(*id),
        ConfigResource::Cluster => image.cluster_configs().clone(),
        ConfigResource::Group(group) => match image.group_configs(group) {
            Some(configs) => configs.clone(),
            None if changes.iter().any(|(_, v)| v.is_some())
                && image.group_configs.len() >= MAX_GROUPS_WITH_CONFIGS =>
            {
                return Err(TopicError::InvalidRequest(format!(
                    "at most {MAX_GROUPS_WITH_CONFIGS} groups can have configs"
                )))
            }
            None => std::collections::BTreeMap::new(),
        },
    };
    let mut records = Vec::new();
    for (i, (key, value)) in changes.iter().enumerate() {
        if changes[..i].iter().any(|(k, _)| k == key) {
            return Err(TopicError::InvalidRequest(
                "Error due to duplicate config keys".into(),
            ));
        }
        if current.get(key) != value.as_ref() {
            records.push(MetadataRecord::Config {
                resource: resource.clone(),
                name: key.clone(),
                value: value.clone(),
            });
        }
    }
    Ok(Plan {
        records,
        response: (),
    })
}

/// Registers (or re-registers) a broker; no records if the same incarnation already
/// registered the same endpoints.
pub fn plan_register_broker(
    image: &MetadataImage,
    broker_id: i32,
    incarnation: Uuid,
    epoch: i64,
    listeners: Vec<Endpoint>,
    rack: Option<String>,
) -> Plan<()> {
    let unchanged = image.broker(broker_id).is_some_and(|b| {
        b.incarnation == incarnation && b.listeners == listeners && b.rack == rack
    });
    let records = if unchanged {
        Vec::new()
    } else {
        vec![MetadataRecord::RegisterBroker {
            broker_id,
            incarnation,
            epoch,
            listeners,
            rack,
        }]
    };
    Plan {
        records,
        response: (),
    }
}

/// Hands the next block of producer ids to `broker_id`.
pub fn plan_producer_id_block(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<Plan<Range<i64>>, ControllerError> {
    let start = image.next_producer_id();
    let end = start
        .checked_add(PRODUCER_ID_BLOCK_SIZE)
        .ok_or(ControllerError::ProducerIdsExhausted)?;
    Ok(Plan {
        records: vec![MetadataRecord::ProducerIds {
            broker_id,
            broker_epoch,
            next_producer_id: end,
        }],
        response: start..end,
    })
}

#[cfg(test)]
mod broker_config_tests {
    use super::test_support::Images;
    use super::*;

    fn set(key: &str, value: &str) -> (String, Option<String>) {
        (key.to_string(), Some(value.to_string()))
    }

    #[test]
    fn broker_configs_are_records_replayed_into_the_image_and_the_snapshot() {
        let mut images = Images::new().brokers(&[1, 2]);
        let plan = plan_alter_broker_configs(
            &images.image,
            &ConfigResource::Cluster,
            &[set("log.retention.ms", "1000")],
        )
        .unwrap();
        assert_eq!(plan.records.len(), 1);
        images.apply(&plan.records);
        let own = plan_alter_broker_configs(
            &images.image,
            &ConfigResource::Broker(2),
            &[set("log.retention.ms", "2000"), set("num.io.threads", "4")],
        )
        .unwrap();
        images.apply(&own.records);
        let image = &images.image;
        assert_eq!(
            image
                .cluster_configs()
                .get("log.retention.ms")
                .map(String::as_str),
            Some("1000")
        );
        assert_eq!(image.broker_configs(2).len(), 2);
        assert!(image.broker_configs(1).is_empty());
        // Setting what is already there writes nothing; a deletion writes one record.
        let same = plan_alter_broker_configs(
            image,
            &ConfigResource::Cluster,
            &[set("log.retention.ms", "1000")],
        )
        .unwrap();
        assert!(same.records.is_empty());
        let deleted = plan_alter_broker_configs(
            image,
            &ConfigResource::Broker(2),
            &[("num.io.threads".to_string(), None)],
        )
        .unwrap();
        assert_eq!(deleted.records.len(), 1);
        let duplicate = plan_alter_broker_configs(
            image,
            &ConfigResource::Cluster,
            &[set("a", "1"), set("a", "2")],
        );
        assert!(matches!(duplicate, Err(TopicError::InvalidRequest(_))));
        // A snapshot keeps both levels.
        let bytes = crate::snapshot::encode(image).unwrap();
        let back = crate::snapshot::decode(std::path::Path::new("s"), &bytes, "test").unwrap();
        assert_eq!(back.cluster_configs(), image.cluster_configs());
        assert_eq!(back.broker_configs(2), image.broker_configs(2));
    }

    #[test]
    fn group_configs_are_records_replayed_into_the_image_and_the_snapshot() {
        let mut images = Images::new().brokers(&[1]);
        let group = ConfigResource::Group("g1".into());
        let plan = plan_alter_broker_configs(
            &images.image,
            &group,
            &[set("consumer.session.timeout.ms", "50000")],
        )
        .unwrap();
        assert_eq!(plan.records.len(), 1);
        images.apply(&plan.records);
        let configs = images
            .image
            .group_configs("g1")
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            configs
                .get("consumer.session.timeout.ms")
                .map(String::as_str),
            Some("50000")
        );
        assert!(images.image.group_configs("g2").is_none());
        let bytes = crate::snapshot::encode(&images.image).unwrap();
        let back = crate::snapshot::decode(std::path::Path::new("s"), &bytes, "test").unwrap();
        assert_eq!(back.group_configs("g1"), images.image.group_configs("g1"));
        // Deleting the last config forgets the group.
        let deleted = plan_alter_broker_configs(
            &images.image,
            &group,
            &[("consumer.session.timeout.ms".to_string(), None)],
        )
        .unwrap();
        images.apply(&deleted.records);
        assert_eq!(images.image.groups_with_configs().count(), 0);
    }
}
