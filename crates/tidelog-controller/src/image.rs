//! The in-memory metadata image: what the cluster looks like after replaying every
//! record up to [`MetadataImage::last_offset`]. It changes only through
//! [`MetadataImage::replay`], so startup (snapshot + log) and normal operation run the
//! same code, and a Raft follower replaying the same records reaches the same image.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::{AclEntry, AclMap};
use crate::record::{ConfigResource, Endpoint, MetadataRecord};

/// Topic names Kafka treats as internal (`Topic.isInternal`): they exist for the
/// coordinators, are created by the broker, and are flagged `is_internal` in Metadata
/// responses. `ops::is_protected` adds the metadata log's name.
pub const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
    /// Explicit per-topic overrides only; defaults come from `topic_config` and the
    /// broker's configuration.
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    pub fn is_internal(&self) -> bool {
        INTERNAL_TOPICS.contains(&self.name.as_str())
    }

    /// Partitions are numbered `0..count` without gaps, so this is also the next id.
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// `-1` when the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Replicas being added by an in-flight reassignment (already in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    /// Replicas to drop once the reassignment completes (still in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
}

impl PartitionImage {
    /// Whether a reassignment is in flight.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition ends up with: `replicas` minus those being removed.
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerImage {
    pub broker_id: i32,
    /// Random per broker process start; tells a restart from a duplicate registration.
    pub incarnation: Uuid,
    pub epoch: i64,
    pub listeners: Vec<Endpoint>,
    pub rack: Option<String>,
    /// Fenced brokers get no new replicas or leaderships. Set by `FenceBroker` when
    /// heartbeats stop, cleared by `UnfenceBroker` or a new registration.
    pub fenced: bool,
}

/// The cluster as the metadata log describes it. Cheap to clone for readers that want
/// a consistent view while the controller moves on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataImage {
    pub(crate) cluster_id: String,
    pub(crate) topics: BTreeMap<Uuid, TopicImage>,
    pub(crate) topic_ids: BTreeMap<String, Uuid>,
    pub(crate) brokers: BTreeMap<i32, BrokerImage>,
    pub(crate) broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    pub(crate) cluster_configs: BTreeMap<String, String>,
    /// Group id -> its dynamic group configs; a group with none is absent.
    pub(crate) group_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub(crate) next_producer_id: i64,
    pub(crate) scram: crate::scram::ScramCredentials,
    /// Shared so that an authorizer can tell, by pointer, that they did not change.
    pub(crate) acls: Arc<AclMap>,
    pub(crate) quotas: crate::quota::ClientQuotas,
    pub(crate) last_offset: Option<u64>,
}

impl MetadataImage {
    /// An empty image: nothing replayed yet.
    pub fn new(cluster_id: impl Into<String>) -> Self {
        MetadataImage {
            cluster_id: cluster_id.into(),
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            brokers: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            cluster_configs: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            next_producer_id: 0,
            scram: BTreeMap::new(),
            acls: Arc::default(),
            quotas: BTreeMap::new(),
            last_offset: None,
        }
    }

    /// Applies the record written at `offset`. A record at or below the last applied
    /// offset is ignored, so replaying an overlap (snapshot + log) is harmless. Records
    /// that refer to a missing topic or partition are ignored with a warning: replay
    /// must never fail, because it must give the same answer on every node.
    pub fn replay(&mut self, offset: u64, record: &MetadataRecord) {
        if self.last_offset.is_some_and(|last| offset <= last) {
            return;
        }
        self.last_offset = Some(offset);
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation,
                epoch,
                listeners,
                rack,
            } => {
                let broker = BrokerImage {
                    broker_id: *broker_id,
                    incarnation: *incarnation,
                    epoch: *epoch,
                    listeners: listeners.clone(),
                    rack: rack.clone(),
                    fenced: false,
                };
                self.brokers.insert(*broker_id, broker);
            }
            MetadataRecord::FenceBroker { broker_id, epoch } => {
                self.set_fenced(offset, *broker_id, *epoch, true);
            }
            MetadataRecord::UnfenceBroker { broker_id, epoch } => {
                self.set_fenced(offset, *broker_id, *epoch, false);
            }
            MetadataRecord::Topic { name, topic_id } => self.replay_topic(offset, name, *topic_id),
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                adding_replicas,
                removing_replicas,
            } => match self.topics.get_mut(topic_id) {
                Some(topic) => {
                    let state = PartitionImage {
                        replicas: replicas.clone(),
                        isr: isr.clone(),
                        leader: *leader,
                        leader_epoch: *leader_epoch,
                        partition_epoch: *partition_epoch,
                        adding_replicas: adding_replicas.clone(),
                        removing_replicas: removing_replicas.clone(),
                    };
                    topic.partitions.insert(*partition, state);
                }
                None => tracing::warn!(offset, %topic_id, "partition record for unknown topic"),
            },
            MetadataRecord::PartitionChange {
                topic_id,
                partition,
                leader,
                isr,
                replicas,
                adding_replicas,
                removing_replicas,
            } => {
                let state = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition));
                match state {
                    Some(state) => {
                        apply_partition_change(state, *leader, isr, replicas);
                        if let Some(adding) = adding_replicas {
                            state.adding_replicas = adding.clone();
                        }
                        if let Some(removing) = removing_replicas {
                            state.removing_replicas = removing.clone();
                        }
                    }
                    None => {
                        tracing::warn!(offset, %topic_id, partition, "change for unknown partition")
                    }
                }
            }
            MetadataRecord::Config {
                resource,
                name,
                value,
            } => self.replay_config(offset, resource, name, value.as_deref()),
            MetadataRecord::RemoveTopic { topic_id } => match self.topics.remove(topic_id) {
                Some(topic) => {
                    self.topic_ids.remove(&topic.name);
                }
                None => tracing::warn!(offset, %topic_id, "removal of unknown topic"),
            },
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                // Never move backwards: an id below the mark may already be in use.
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::ScramCredential(_) | MetadataRecord::RemoveScramCredential { .. } => {
                self.replay_scram(record)
            }
            MetadataRecord::AccessControlEntry { id, acl } => {
                Arc::make_mut(&mut self.acls).insert(*id, acl.clone());
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                if Arc::make_mut(&mut self.acls).remove(id).is_none() {
                    tracing::warn!(offset, %id, "removal of unknown ACL");
                }
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                self.replay_quota(entity, key, value.map(|v| v.0))
            }
        }
    }

    fn set_fenced(&mut self, offset: u64, broker_id: i32, epoch: i64, fenced: bool) {
        match self.brokers.get_mut(&broker_id) {
            Some(broker) if broker.epoch == epoch => broker.fenced = fenced,
            Some(_) => tracing::debug!(
                offset,
                broker_id,
                epoch,
                "fencing change for a stale broker epoch"
            ),
            None => tracing::warn!(offset, broker_id, "fencing change for an unknown broker"),
        }
    }

    fn replay_topic(&mut self, offset: u64, name: &str, topic_id: Uuid) {
        if self.topics.get(&topic_id).is_some_and(|t| t.name == name) {
            return; // already known: a repeated record must not wipe its partitions
        }
        if let Some(old_id) = self.topic_ids.insert(name.to_owned(), topic_id) {
            tracing::warn!(offset, %name, "topic record replaces a live topic of the same name");
            self.topics.remove(&old_id);
        }
        if let Some(renamed) = self.topics.remove(&topic_id) {
            tracing::warn!(offset, %topic_id, old = %renamed.name, %name, "topic record reuses a live topic id");
            self.topic_ids.remove(&renamed.name);
        }
        let topic = TopicImage {
            name: name.to_owned(),
            topic_id,
            partitions: BTreeMap::new(),
            configs: BTreeMap::new(),
        };
        self.topics.insert(topic_id, topic);
    }

    fn replay_config(
        &mut self,
        offset: u64,
        resource: &ConfigResource,
        name: &str,
        value: Option<&str>,
    ) {
        let map = match resource {
            ConfigResource::Topic(topic) => {
                let Some(id) = self.topic_ids.get(topic) else {
                    tracing::warn!(offset, %topic, "config for unknown topic");
                    return;
                };
                match self.topics.get_mut(id) {
                    Some(t) => &mut t.configs,
                    None => return,
                }
            }
            ConfigResource::Broker(id) => self.broker_configs.entry(*id).or_default(),
            ConfigResource::Cluster => &mut self.cluster_configs,
            ConfigResource::Group(group) => self.group_configs.entry(group.clone()).or_default(),
        };
        match value {
            Some(v) => {
                map.insert(name.to_owned(), v.to_owned());
            }
            None => {
                map.remove(name);
            }
        }
        if let ConfigResource::Broker(id) = resource {
            if self.broker_configs.get(id).is_some_and(|m| m.is_empty()) {
                self.broker_configs.remove(id);
            }
        }
        if let ConfigResource::Group(group) = resource {
            if self.group_configs.get(group).is_some_and(|m| m.is_empty()) {
                self.group_configs.remove(group);
            }
        }
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Offset of the last record replayed into this image, `None` if none was.
    pub fn last_offset(&self) -> Option<u64> {
        self.last_offset
    }

    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicImage> {
        self.topics.get(id)
    }

    /// All topics, ordered by name.
    pub fn topics(&self) -> impl Iterator<Item = &TopicImage> {
        self.topic_ids.values().filter_map(|id| self.topics.get(id))
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// All registered brokers, ordered by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values()
    }

    pub fn broker(&self, id: i32) -> Option<&BrokerImage> {
        self.brokers.get(&id)
    }

    /// The inter-broker listener of broker `id` (each broker registers it first), as
    /// `(host, port)`.
    pub fn inter_broker_endpoint(&self, id: i32) -> Option<(String, u16)> {
        let e = self.broker(id)?.listeners.first()?;
        Some((e.host.clone(), e.port))
    }

    /// Registered, unfenced brokers ordered by id: the candidates for new replicas.
    pub fn live_broker_ids(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.broker_id)
            .collect()
    }

    /// Registered and not fenced: may lead partitions and be in ISRs.
    pub fn is_broker_live(&self, broker_id: i32) -> bool {
        self.brokers.get(&broker_id).is_some_and(|b| !b.fenced)
    }

    /// The partition's replicas on brokers that are fenced or not registered (what a
    /// Metadata response lists as offline replicas).
    pub fn offline_replicas(&self, partition: &PartitionImage) -> Vec<i32> {
        partition
            .replicas
            .iter()
            .copied()
            .filter(|r| !self.is_broker_live(*r))
            .collect()
    }

    /// The topic's explicit config overrides (empty for an unknown topic).
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.topic(name)
            .map(|t| t.configs.clone())
            .unwrap_or_default()
    }

    /// Dynamic config of one broker (empty when none was set).
    pub fn broker_configs(&self, broker_id: i32) -> BTreeMap<String, String> {
        self.broker_configs
            .get(&broker_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Dynamic cluster-wide defaults.
    pub fn cluster_configs(&self) -> &BTreeMap<String, String> {
        &self.cluster_configs
    }

    /// One group's dynamic configs (empty when none was set).
    pub fn group_configs(&self, group_id: &str) -> Option<&BTreeMap<String, String>> {
        self.group_configs.get(group_id)
    }

    /// Every group that has dynamic configs, by id.
    pub fn groups_with_configs(&self) -> impl Iterator<Item = &str> {
        self.group_configs.keys().map(String::as_str)
    }

    /// Every ACL, by id.
    pub fn acls(&self) -> &Arc<BTreeMap<Uuid, AclEntry>> {
        &self.acls
    }

    /// The first producer id no block has included yet.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// The existing topic whose name collides with `name` once '.' and '_' are treated
    /// alike (Kafka forbids such pairs because metric names cannot tell them apart).
    pub fn colliding_topic(&self, name: &str) -> Option<&str> {
        let wanted = normalize_topic_name(name);
        self.topic_ids
            .keys()
            .find(|existing| existing.as_str() != name && normalize_topic_name(existing) == wanted)
            .map(String::as_str)
    }
}

fn normalize_topic_name(name: &str) -> String {
    name.replace('.', "_")
}

fn apply_partition_change(
    state: &mut PartitionImage,
    leader: Option<i32>,
    isr: &Option<Vec<i32>>,
    replicas: &Option<Vec<i32>>,
) {
    if let Some(leader) = leader {
        if leader != state.leader {
            state.leader = leader;
            state.leader_epoch = state.leader_epoch.saturating_add(1);
        }
    }
    if let Some(isr) = isr {
        state.isr = isr.clone();
    }
    if let Some(replicas) = replicas {
        state.replicas = replicas.clone();
    }
    state.partition_epoch = state.partition_epoch.saturating_add(1);
}
