//! Controller requests a follower sends on to the leader (one hop: the leader never
//! forwards again), and their answers.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::controller::{BrokerTraffic, HeartbeatReply};
use super::QuorumStatus;
use crate::acl::{AclEntry, AclFilter};
use crate::image::{PartitionImage, TopicImage};
use crate::ops::{AlterPartition, ElectionKind, PartitionError, Reassignment, TopicPartition};
use crate::quota::{QuotaAlteration, QuotaResult};
use crate::record::{ConfigResource, Endpoint};
use crate::scram::{ScramResult, ScramUpsertion};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ForwardedCall {
    RegisterBroker {
        broker_id: i32,
        incarnation: Uuid,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
    },
    BrokerHeartbeat {
        broker_id: i32,
        broker_epoch: i64,
        /// The broker's traffic counters; absent from an older node's heartbeat.
        #[serde(default)]
        traffic: Option<BrokerTraffic>,
    },
    CreateTopic {
        name: String,
        num_partitions: i32,
        replication_factor: i16,
        assignments: Vec<(i32, Vec<i32>)>,
        configs: Vec<(String, Option<String>)>,
        validate_only: bool,
        /// The broker's own creation of a coordinator's internal topic (never set for a
        /// client's CreateTopics); absent from an older node's request, so `false`.
        #[serde(default)]
        internal: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        new_total: i32,
        validate_only: bool,
    },
    AlterTopicConfigs {
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    /// Dynamic configs of one broker or of the cluster default (validated by the
    /// broker that took the request).
    AlterBrokerConfigs {
        resource: ConfigResource,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
    DescribeQuorum,
    AlterPartition(AlterPartition),
    ControlledShutdown {
        broker_id: i32,
        broker_epoch: i64,
        /// The broker leaves now with what it could not hand over: fence it anyway.
        /// Absent from an older node's request, so `false`.
        #[serde(default)]
        exiting: bool,
    },
    ElectLeaders {
        kind: ElectionKind,
        partitions: Option<Vec<TopicPartition>>,
    },
    AlterReassignments {
        changes: Vec<(String, i32, Option<Vec<i32>>)>,
    },
    ListReassignments {
        partitions: Option<Vec<TopicPartition>>,
    },
    /// AlterUserScramCredentials: deletions `(user, mechanism)` and upsertions.
    AlterScramCredentials {
        deletions: Vec<(String, i8)>,
        upsertions: Vec<ScramUpsertion>,
    },
    /// CreateAcls: one outcome per ACL, in order.
    CreateAcls {
        acls: Vec<AclEntry>,
    },
    /// DeleteAcls: one outcome per filter, in order.
    DeleteAcls {
        filters: Vec<AclFilter>,
    },
    /// AlterClientQuotas: one outcome per entry, in order.
    AlterClientQuotas {
        alterations: Vec<QuotaAlteration>,
        validate_only: bool,
    },
    /// The image, once it is newer than `after` or `max_wait_ms` passed (any voter
    /// answers this one, leader or not).
    FetchImage {
        after: Option<u64>,
        max_wait_ms: u64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ForwardReply {
    BrokerEpoch(i64),
    Heartbeat(HeartbeatReply),
    Topic(TopicImage),
    TopicId(Uuid),
    Done,
    ProducerIds {
        start: i64,
        end: i64,
    },
    Status(QuorumStatus),
    Partition(PartitionImage),
    /// Leaderships a broker in controlled shutdown still holds.
    LeadershipsHeld(u32),
    PartitionResults(Vec<(TopicPartition, Result<(), PartitionError>)>),
    Reassignments(Vec<Reassignment>),
    /// One `(user, error code, message)` per user of an AlterUserScramCredentials.
    ScramResults(Vec<ScramResult>),
    /// The image in the metadata snapshot format, `None` if not newer than asked.
    Image(Option<Vec<u8>>),
    /// Per ACL: created (or already present), or why it is invalid.
    AclsCreated(Vec<Result<(), String>>),
    /// Per filter: the ACLs it removed, or why it is invalid.
    AclsDeleted(Vec<Result<Vec<AclEntry>, String>>),
    /// Per AlterClientQuotas entry: `(entity, error code, message)`.
    QuotaResults(Vec<QuotaResult>),
    Failed {
        code: i16,
        message: String,
    },
}
