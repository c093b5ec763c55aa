//! What the partition planners (elections, AlterPartition, reassignment) share: their
//! request and answer types, their per-partition error, and the step from a planned
//! partition state to the `PartitionChange` record that gets there.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::record::MetadataRecord;

/// Topic config (and cluster default) that lets a replica outside the ISR lead.
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";

/// An ISR change asked by the partition's leader (Kafka's AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartition {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub topic_id: Uuid,
    pub partition: i32,
    /// The leader epoch and partition epoch the leader last saw: a change based on an
    /// older state is refused.
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// Which leader an ElectLeaders request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionKind {
    /// The first replica, if it is live and in the ISR.
    Preferred,
    /// For a partition without a live leader: an ISR member if one is live, else any
    /// live replica (which may lose acknowledged records).
    Unclean,
}

/// One partition's in-flight reassignment (ListPartitionReassignments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    /// Every current replica: the target ones first, then those being removed.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// Why one partition's request was refused; each variant is one Kafka error code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum PartitionError {
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    #[error("{0}")]
    FencedLeaderEpoch(String),
    #[error("{0}")]
    InvalidUpdateVersion(String),
    #[error("{0}")]
    IneligibleReplica(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    ElectionNotNeeded(String),
    #[error("{0}")]
    PreferredLeaderNotAvailable(String),
    #[error("{0}")]
    EligibleLeadersNotAvailable(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    NoReassignmentInProgress(String),
}

impl PartitionError {
    /// The Kafka protocol error code.
    pub fn error_code(&self) -> i16 {
        match self {
            PartitionError::UnknownTopicOrPartition(_) => 3,
            PartitionError::FencedLeaderEpoch(_) => 74,
            PartitionError::InvalidUpdateVersion(_) => 108,
            PartitionError::IneligibleReplica(_) => 107,
            PartitionError::InvalidRequest(_) => 42,
            PartitionError::ElectionNotNeeded(_) => 84,
            PartitionError::PreferredLeaderNotAvailable(_) => 80,
            PartitionError::EligibleLeadersNotAvailable(_) => 83,
            PartitionError::InvalidReplicaAssignment(_) => 39,
            PartitionError::NoReassignmentInProgress(_) => 85,
        }
    }
}

/// A (topic name, partition) pair as the admin requests name them.
pub type TopicPartition = (String, i32);

/// One result per partition of a multi-partition request.
pub type PartitionResults = Vec<(TopicPartition, Result<(), PartitionError>)>;

/// Registered and not fenced: may lead, join an ISR, get new replicas.
pub(crate) fn is_live(image: &MetadataImage, broker_id: i32) -> bool {
    image.is_broker_live(broker_id)
}

/// Where `unclean.leader.election.enable` comes from for a topic that does not set it,
/// in the order of Kafka's `ConfigurationControlManager.getTopicConfig`: the dynamic
/// config of the controller's own node, then the cluster-wide dynamic default, then
/// the controller's static setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncleanDefault {
    /// The node whose dynamic broker config counts (the active controller's).
    pub controller_id: Option<i32>,
    /// The static setting.
    pub configured: bool,
}

impl From<bool> for UncleanDefault {
    /// The static setting alone (no node's dynamic config consulted).
    fn from(configured: bool) -> Self {
        UncleanDefault {
            controller_id: None,
            configured,
        }
    }
}

/// Whether a replica outside the ISR may be elected: the topic's config, else the
/// controller node's dynamic config, else the cluster's, else the static setting.
pub(crate) fn unclean_allowed(
    image: &MetadataImage,
    topic: &TopicImage,
    default: UncleanDefault,
) -> bool {
    let node = default
        .controller_id
        .and_then(|id| image.broker_configs.get(&id))
        .and_then(|configs| configs.get(UNCLEAN_LEADER_ELECTION));
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION)
        .or(node)
        .or_else(|| image.cluster_configs().get(UNCLEAN_LEADER_ELECTION))
        .map_or(default.configured, |v| v.eq_ignore_ascii_case("true"))
}

/// Replicas in the order they should be tried as leader: the target replicas first
/// (in assignment order), then those a reassignment is removing.
pub(crate) fn leader_candidates(p: &PartitionImage) -> impl Iterator<Item = i32> + '_ {
    let target = p
        .replicas
        .iter()
        .filter(|r| !p.removing_replicas.contains(r));
    let removing = p
        .replicas
        .iter()
        .filter(|r| p.removing_replicas.contains(r));
    target.chain(removing).copied()
}

/// Finishes an in-flight reassignment once every target replica is in the ISR:
/// replicas become the target, the ISR loses the removed ones, and a leader being
/// removed hands over to a live target ISR member.
pub(crate) fn complete_if_caught_up(p: &mut PartitionImage, live: impl Fn(i32) -> bool) {
    if !p.is_reassigning() {
        return;
    }
    let target = p.target_replicas();
    if target.is_empty() || !target.iter().all(|r| p.isr.contains(r)) {
        return;
    }
    p.isr.retain(|r| target.contains(r));
    if !target.contains(&p.leader) {
        p.leader = target
            .iter()
            .copied()
            .find(|r| p.isr.contains(r) && live(*r))
            .unwrap_or(-1);
    }
    p.replicas = target;
    p.adding_replicas.clear();
    p.removing_replicas.clear();
}

/// The `PartitionChange` taking `before` to `after` (`None` when they are equal in
/// everything a change record can set).
pub(crate) fn change_record(
    topic_id: Uuid,
    partition: i32,
    before: &PartitionImage,
    after: &PartitionImage,
) -> Option<MetadataRecord> {
    fn differs<T: PartialEq + Clone>(a: &T, b: &T) -> Option<T> {
        (a != b).then(|| b.clone())
    }
    let record = MetadataRecord::PartitionChange {
        topic_id,
        partition,
        leader: differs(&before.leader, &after.leader),
        isr: differs(&before.isr, &after.isr),
        replicas: differs(&before.replicas, &after.replicas),
        adding_replicas: differs(&before.adding_replicas, &after.adding_replicas),
        removing_replicas: differs(&before.removing_replicas, &after.removing_replicas),
    };
    match &record {
        MetadataRecord::PartitionChange {
            leader: None,
            isr: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
            ..
        } => None,
        _ => Some(record),
    }
}

/// `after` with the epochs replay will give it (partition epoch always bumped, leader
/// epoch when the leader changed): the answer to give before the record is applied.
pub(crate) fn with_next_epochs(
    before: &PartitionImage,
    mut after: PartitionImage,
) -> PartitionImage {
    if after.leader != before.leader {
        after.leader_epoch = before.leader_epoch.saturating_add(1);
    }
    after.partition_epoch = before.partition_epoch.saturating_add(1);
    after
}

/// A copy of `image` with `records` applied after its last offset: lets a planner
/// see the state a batch it is building will create (e.g. a broker just fenced).
pub fn image_with(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
    let mut next = image.clone();
    let mut offset = image.last_offset().map_or(0, |o| o.saturating_add(1));
    for record in records {
        next.replay(offset, record);
        offset = offset.saturating_add(1);
    }
    next
}
