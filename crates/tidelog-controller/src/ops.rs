//! Request handlers as pure functions: current image in, `(records, response)` out.
//! Nothing here changes state; the caller appends the records and replays them. The
//! single-node [`crate::Controller`] and a future Raft controller share these.

use std::collections::BTreeMap;
use std::ops::Range;

use uuid::Uuid;

use crate::error::{ControllerError, TopicError};
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::placement::round_robin;
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

/// Plans a topic creation with the given (fresh, non-nil) `topic_id`; `placement_start`
/// rotates which broker leads partition 0.
pub fn plan_create_topic(
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
    let brokers = image.live_broker_ids();
    let rf = checked_replication_factor(replication_factor, brokers.len())?;
    let count = usize::try_from(num_partitions).unwrap_or(0);
    Ok(round_robin(&brokers, count, rf, placement_start))
}

fn checked_replication_factor(
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
            "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {live_brokers} broker(s) are registered."
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
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
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

fn new_partition_record(topic_id: Uuid, partition: i32, replicas: &[i32]) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        partition_epoch: 0,
    }
}

fn new_partition_image(replicas: Vec<i32>) -> PartitionImage {
    PartitionImage {
        isr: replicas.clone(),
        leader: replicas.first().copied().unwrap_or(-1),
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
    }
}

pub fn plan_delete_topic(image: &MetadataImage, name: &str) -> Result<Plan<Uuid>, TopicError> {
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
/// replication factor of the existing ones.
pub fn plan_create_partitions(
    image: &MetadataImage,
    name: &str,
    new_total: i32,
    placement_start: usize,
) -> Result<Plan<()>, TopicError> {
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
        .map_or(1, |p| p.replicas.len());
    let brokers = image.live_broker_ids();
    let rf = checked_replication_factor(
        i16::try_from(existing_rf).unwrap_or(i16::MAX),
        brokers.len(),
    )?;
    let count = usize::try_from(new_total - current).unwrap_or(0);
    let start = placement_start.wrapping_add(usize::try_from(current).unwrap_or(0));
    let records = (current..new_total)
        .zip(round_robin(&brokers, count, rf, start))
        .map(|(partition, replicas)| new_partition_record(topic.topic_id, partition, &replicas))
        .collect();
    Ok(Plan {
        records,
        response: (),
    })
}

/// Incremental config change of a topic: `Some` sets, `None` deletes (back to the
/// default). Produces records only for entries that actually change.
pub fn plan_alter_topic_configs(
    image: &MetadataImage,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<Plan<()>, TopicError> {
    let topic = image
        .topic(name)
        .ok_or(TopicError::UnknownTopicOrPartition)?;
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
