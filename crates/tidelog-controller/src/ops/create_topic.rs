//! Planning CreateTopics: name rules, partition count and replication factor, manual
//! assignments, initial configs.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{Plan, MAX_PARTITIONS_PER_TOPIC, MAX_TOPIC_NAME_LEN};
use crate::error::TopicError;
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::placement::place;
use crate::record::{ConfigResource, MetadataRecord};
use crate::topic_config;

/// A CreateTopics entry. `num_partitions` / `replication_factor` of -1 take the
/// defaults; `assignments` (partition, replicas) replaces both when non-empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

/// Broker-level `num.partitions` and `default.replication.factor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDefaults {
    pub num_partitions: i32,
    pub replication_factor: i16,
}

impl Default for TopicDefaults {
    fn default() -> Self {
        TopicDefaults {
            num_partitions: 1,
            replication_factor: 1,
        }
    }
}

/// Kafka's topic name rules: 1..=249 chars of `[a-zA-Z0-9._-]`, not "." or "..".
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let invalid = |why: String| Err(TopicError::InvalidTopicException(why));
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Plans a client's topic creation (CreateTopics, or auto-creation by Metadata) with the
/// given (fresh, non-nil) `topic_id`; `placement_start` rotates which broker leads
/// partition 0. Internal topics are refused (see `internal_topics`).
pub fn plan_create_topic(
    image: &MetadataImage,
    req: &CreateTopic,
    defaults: TopicDefaults,
    topic_id: Uuid,
    placement_start: usize,
) -> Result<Plan<TopicImage>, TopicError> {
    validate_topic_name(&req.name)?;
    super::internal_topics::check_client_create(&req.name)?;
    plan_new_topic(image, req, defaults, topic_id, placement_start)
}

/// The creation itself, once the requester may create `req.name`.
pub(super) fn plan_new_topic(
    image: &MetadataImage,
    req: &CreateTopic,
    defaults: TopicDefaults,
    topic_id: Uuid,
    placement_start: usize,
) -> Result<Plan<TopicImage>, TopicError> {
    validate_topic_name(&req.name)?;
    if image.topic(&req.name).is_some() {
        return Err(TopicError::TopicAlreadyExists);
    }
    if let Some(other) = image.colliding_topic(&req.name) {
        return Err(TopicError::InvalidTopicException(format!(
            "Topic '{}' collides with existing topic: {other}",
            req.name
        )));
    }
    let assignment = if req.assignments.is_empty() {
        automatic_assignment(image, req, defaults, placement_start)?
    } else {
        manual_assignment(image, req)?
    };
    let configs = validated_new_configs(&req.configs)?;

    let mut records = Vec::with_capacity(1 + configs.len() + assignment.len());
    records.push(MetadataRecord::Topic {
        name: req.name.clone(),
        topic_id,
    });
    for (name, value) in &configs {
        records.push(MetadataRecord::Config {
            resource: ConfigResource::Topic(req.name.clone()),
            name: name.clone(),
            value: Some(value.clone()),
        });
    }
    let mut partitions = BTreeMap::new();
    for (partition, replicas) in (0..).zip(assignment) {
        records.push(new_partition_record(topic_id, partition, &replicas));
        partitions.insert(partition, new_partition_image(replicas));
    }
    let response = TopicImage {
        name: req.name.clone(),
        topic_id,
        partitions,
        configs,
    };
    Ok(Plan { records, response })
}

fn automatic_assignment(
    image: &MetadataImage,
    req: &CreateTopic,
    defaults: TopicDefaults,
    placement_start: usize,
) -> Result<Vec<Vec<i32>>, TopicError> {
    let num_partitions = if req.num_partitions == -1 {
        defaults.num_partitions
    } else {
        req.num_partitions
    };
    if num_partitions < 1 {
        return Err(TopicError::InvalidPartitions(
            "Number of partitions was set to an invalid non-positive value.".into(),
        ));
    }
    if num_partitions > MAX_PARTITIONS_PER_TOPIC {
        return Err(TopicError::InvalidPartitions(format!(
            "Number of partitions {num_partitions} exceeds the limit of {MAX_PARTITIONS_PER_TOPIC}."
        )));
    }
    let replication_factor = if req.replication_factor == -1 {
        defaults.replication_factor
    } else {
        req.replication_factor
    };
    let brokers = live_brokers(image);
    let rf = checked_replication_factor(replication_factor, brokers.len())?;
    let count = usize::try_from(num_partitions).unwrap_or(0);
    Ok(place(&brokers, count, rf, placement_start))
}

/// Unfenced brokers (id order) with their racks: where new replicas may go.
pub(super) fn live_brokers(image: &MetadataImage) -> Vec<(i32, Option<&str>)> {
    image
        .brokers()
        .filter(|b| !b.fenced)
        .map(|b| (b.broker_id, b.rack.as_deref()))
        .collect()
}

pub(super) fn checked_replication_factor(
    replication_factor: i16,
    live_brokers: usize,
) -> Result<usize, TopicError> {
    if replication_factor < 1 {
        return Err(TopicError::InvalidReplicationFactor(
            "Replication factor must be larger than 0.".into(),
        ));
    }
    let rf = usize::try_from(replication_factor).unwrap_or(usize::MAX);
    if rf > live_brokers {
        return Err(TopicError::InvalidReplicationFactor(format!(
            "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {live_brokers} broker(s) are registered and unfenced."
        )));
    }
    Ok(rf)
}

fn manual_assignment(
    image: &MetadataImage,
    req: &CreateTopic,
) -> Result<Vec<Vec<i32>>, TopicError> {
    if req.num_partitions != -1 || req.replication_factor != -1 {
        return Err(TopicError::InvalidRequest(
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
        ));
    }
    if req.assignments.len() > MAX_PARTITIONS_PER_TOPIC as usize {
        return Err(TopicError::InvalidPartitions(format!(
            "Number of partitions exceeds the limit of {MAX_PARTITIONS_PER_TOPIC}."
        )));
    }
    let mut sorted: Vec<&(i32, Vec<i32>)> = req.assignments.iter().collect();
    sorted.sort_by_key(|(p, _)| *p);
    let mut out = Vec::with_capacity(sorted.len());
    for (expected, (partition, replicas)) in (0..).zip(sorted) {
        if *partition != expected {
            return Err(TopicError::InvalidReplicaAssignment(
                "Partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        check_replica_list(image, *partition, replicas)?;
        if out
            .first()
            .is_some_and(|first: &Vec<i32>| first.len() != replicas.len())
        {
            return Err(TopicError::InvalidReplicaAssignment(
                "All partitions should have the same number of replicas".into(),
            ));
        }
        out.push(replicas.clone());
    }
    Ok(out)
}

fn check_replica_list(
    image: &MetadataImage,
    partition: i32,
    replicas: &[i32],
) -> Result<(), TopicError> {
    let bad = |why: String| Err(TopicError::InvalidReplicaAssignment(why));
    if replicas.is_empty() {
        return bad(format!(
            "The manual partition assignment for partition {partition} is empty."
        ));
    }
    for (i, broker) in replicas.iter().enumerate() {
        if replicas[..i].contains(broker) {
            return bad(format!(
                "The manual partition assignment for partition {partition} contains duplicate broker {broker}."
            ));
        }
        if image.broker(*broker).is_none_or(|b| b.fenced) {
            return bad(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered and unfenced."
            ));
        }
    }
    Ok(())
}

fn validated_new_configs(
    configs: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, TopicError> {
    let mut out = BTreeMap::new();
    for (name, value) in configs {
        let Some(value) = value else {
            return Err(TopicError::InvalidConfig(format!(
                "Null value not supported for topic configs: {name}"
            )));
        };
        topic_config::validate(name, value)?;
        if out.insert(name.clone(), value.clone()).is_some() {
            return Err(TopicError::InvalidRequest(format!(
                "Duplicate config name {name}"
            )));
        }
    }
    Ok(out)
}

pub(super) fn new_partition_record(
    topic_id: Uuid,
    partition: i32,
    replicas: &[i32],
) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

fn new_partition_image(replicas: Vec<i32>) -> PartitionImage {
    PartitionImage {
        isr: replicas.clone(),
        leader: replicas.first().copied().unwrap_or(-1),
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}
