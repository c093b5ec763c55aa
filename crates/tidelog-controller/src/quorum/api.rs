//! The typed controller requests, shared by [`super::QuorumController`] (on a voter),
//! [`super::ControllerClient`] (on a broker-only node) and [`super::ControllerHandle`]
//! (either): each builds a [`ForwardedCall`], routes it, and unpacks the reply. The
//! three types get the same request methods from one list, [`controller_requests`].

use std::future::Future;
use std::ops::Range;

use uuid::Uuid;

use super::controller::{BrokerTraffic, HeartbeatReply};
use super::error::{codes, RequestError};
use super::forward::{ForwardReply, ForwardedCall};
use super::QuorumStatus;
use crate::acl::{AclEntry, AclFilter};
use crate::image::{PartitionImage, TopicImage};
use crate::ops::{AlterPartition, CreateTopic, ElectionKind, Reassignment, TopicPartition};
use crate::quota::{QuotaAlteration, QuotaResult};
use crate::record::{ConfigResource, Endpoint};
use crate::scram::{ScramResult, ScramUpsertion};

/// Where a request goes: this voter (forwarding to the leader) or a remote voter.
pub(crate) trait Route: Sync {
    fn route(
        &self,
        call: ForwardedCall,
    ) -> impl Future<Output = Result<ForwardReply, RequestError>> + Send;
}

/// Registers (or re-registers) a broker; returns its broker epoch.
pub(crate) async fn register_broker(
    route: &impl Route,
    broker_id: i32,
    incarnation: Uuid,
    listeners: Vec<Endpoint>,
    rack: Option<String>,
) -> Result<i64, RequestError> {
    let call = ForwardedCall::RegisterBroker {
        broker_id,
        incarnation,
        listeners,
        rack,
    };
    match route.route(call).await? {
        ForwardReply::BrokerEpoch(epoch) => Ok(epoch),
        other => Err(unexpected(&other)),
    }
}

/// Keeps a broker's session alive; unfences it if it was fenced.
pub(crate) async fn broker_heartbeat(
    route: &impl Route,
    broker_id: i32,
    broker_epoch: i64,
    traffic: Option<BrokerTraffic>,
) -> Result<HeartbeatReply, RequestError> {
    match route
        .route(ForwardedCall::BrokerHeartbeat {
            broker_id,
            broker_epoch,
            traffic,
        })
        .await?
    {
        ForwardReply::Heartbeat(reply) => Ok(reply),
        other => Err(unexpected(&other)),
    }
}

/// A topic creation; `internal` only for the broker's own coordinator topics.
pub(crate) async fn create_topic(
    route: &impl Route,
    req: CreateTopic,
    validate_only: bool,
    internal: bool,
) -> Result<TopicImage, RequestError> {
    let call = ForwardedCall::CreateTopic {
        name: req.name,
        num_partitions: req.num_partitions,
        replication_factor: req.replication_factor,
        assignments: req.assignments,
        configs: req.configs,
        validate_only,
        internal,
    };
    match route.route(call).await? {
        ForwardReply::Topic(topic) => Ok(topic),
        other => Err(unexpected(&other)),
    }
}

/// Deletes a topic; returns its id.
pub(crate) async fn delete_topic(route: &impl Route, name: &str) -> Result<Uuid, RequestError> {
    let call = ForwardedCall::DeleteTopic {
        name: name.to_owned(),
    };
    match route.route(call).await? {
        ForwardReply::TopicId(id) => Ok(id),
        other => Err(unexpected(&other)),
    }
}

pub(crate) async fn create_partitions(
    route: &impl Route,
    name: &str,
    new_total: i32,
    validate_only: bool,
) -> Result<(), RequestError> {
    let call = ForwardedCall::CreatePartitions {
        name: name.to_owned(),
        new_total,
        validate_only,
    };
    match route.route(call).await? {
        ForwardReply::Done => Ok(()),
        other => Err(unexpected(&other)),
    }
}

pub(crate) async fn alter_topic_configs(
    route: &impl Route,
    name: &str,
    changes: Vec<(String, Option<String>)>,
    validate_only: bool,
) -> Result<(), RequestError> {
    let call = ForwardedCall::AlterTopicConfigs {
        name: name.to_owned(),
        changes,
        validate_only,
    };
    match route.route(call).await? {
        ForwardReply::Done => Ok(()),
        other => Err(unexpected(&other)),
    }
}

pub(crate) async fn alter_broker_configs(
    route: &impl Route,
    resource: ConfigResource,
    changes: Vec<(String, Option<String>)>,
    validate_only: bool,
) -> Result<(), RequestError> {
    let call = ForwardedCall::AlterBrokerConfigs {
        resource,
        changes,
        validate_only,
    };
    match route.route(call).await? {
        ForwardReply::Done => Ok(()),
        other => Err(unexpected(&other)),
    }
}

/// Hands a block of producer ids to a registered broker.
pub(crate) async fn allocate_producer_ids(
    route: &impl Route,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<Range<i64>, RequestError> {
    let call = ForwardedCall::AllocateProducerIds {
        broker_id,
        broker_epoch,
    };
    match route.route(call).await? {
        ForwardReply::ProducerIds { start, end } => Ok(start..end),
        other => Err(unexpected(&other)),
    }
}

/// The quorum as the leader sees it (every voter's log end and lag).
pub(crate) async fn describe_quorum(route: &impl Route) -> Result<QuorumStatus, RequestError> {
    match route.route(ForwardedCall::DescribeQuorum).await? {
        ForwardReply::Status(status) => Ok(status),
        other => Err(unexpected(&other)),
    }
}

/// One result per partition of an election or reassignment request.
pub type PartitionOutcomes = Vec<(TopicPartition, Result<(), RequestError>)>;

/// An ISR change asked by the partition leader; answers the partition as applied.
pub(crate) async fn alter_partition(
    route: &impl Route,
    req: AlterPartition,
) -> Result<PartitionImage, RequestError> {
    match route.route(ForwardedCall::AlterPartition(req)).await? {
        ForwardReply::Partition(partition) => Ok(partition),
        other => Err(unexpected(&other)),
    }
}

/// Moves a broker's leaderships away; answers how many it still holds. `exiting`:
/// the broker leaves now, fence it even though it still leads those.
pub(crate) async fn controlled_shutdown(
    route: &impl Route,
    broker_id: i32,
    broker_epoch: i64,
    exiting: bool,
) -> Result<u32, RequestError> {
    let call = ForwardedCall::ControlledShutdown {
        broker_id,
        broker_epoch,
        exiting,
    };
    match route.route(call).await? {
        ForwardReply::LeadershipsHeld(held) => Ok(held),
        other => Err(unexpected(&other)),
    }
}

pub(crate) async fn elect_leaders(
    route: &impl Route,
    kind: ElectionKind,
    partitions: Option<Vec<TopicPartition>>,
) -> Result<PartitionOutcomes, RequestError> {
    let call = ForwardedCall::ElectLeaders { kind, partitions };
    partition_outcomes(route.route(call).await?)
}

pub(crate) async fn alter_reassignments(
    route: &impl Route,
    changes: Vec<(String, i32, Option<Vec<i32>>)>,
) -> Result<PartitionOutcomes, RequestError> {
    let call = ForwardedCall::AlterReassignments { changes };
    partition_outcomes(route.route(call).await?)
}

pub(crate) async fn list_reassignments(
    route: &impl Route,
    partitions: Option<Vec<TopicPartition>>,
) -> Result<Vec<Reassignment>, RequestError> {
    match route
        .route(ForwardedCall::ListReassignments { partitions })
        .await?
    {
        ForwardReply::Reassignments(list) => Ok(list),
        other => Err(unexpected(&other)),
    }
}

/// AlterUserScramCredentials; one result per user named.
pub(crate) async fn alter_scram_credentials(
    route: &impl Route,
    deletions: Vec<(String, i8)>,
    upsertions: Vec<ScramUpsertion>,
) -> Result<Vec<ScramResult>, RequestError> {
    let call = ForwardedCall::AlterScramCredentials {
        deletions,
        upsertions,
    };
    match route.route(call).await? {
        ForwardReply::ScramResults(results) => Ok(results),
        other => Err(unexpected(&other)),
    }
}

/// AlterClientQuotas; one result per entry, in order.
pub(crate) async fn alter_client_quotas(
    route: &impl Route,
    alterations: Vec<QuotaAlteration>,
    validate_only: bool,
) -> Result<Vec<QuotaResult>, RequestError> {
    let call = ForwardedCall::AlterClientQuotas {
        alterations,
        validate_only,
    };
    match route.route(call).await? {
        ForwardReply::QuotaResults(results) => Ok(results),
        other => Err(unexpected(&other)),
    }
}

/// Creates ACLs: per ACL, done or why it is invalid.
pub(crate) async fn create_acls(
    route: &impl Route,
    acls: Vec<AclEntry>,
) -> Result<Vec<Result<(), String>>, RequestError> {
    match route.route(ForwardedCall::CreateAcls { acls }).await? {
        ForwardReply::AclsCreated(outcomes) => Ok(outcomes),
        other => Err(unexpected(&other)),
    }
}

/// Deletes the ACLs matching each filter: per filter, those removed or why it is invalid.
pub(crate) async fn delete_acls(
    route: &impl Route,
    filters: Vec<AclFilter>,
) -> Result<Vec<Result<Vec<AclEntry>, String>>, RequestError> {
    match route.route(ForwardedCall::DeleteAcls { filters }).await? {
        ForwardReply::AclsDeleted(outcomes) => Ok(outcomes),
        other => Err(unexpected(&other)),
    }
}

fn partition_outcomes(reply: ForwardReply) -> Result<PartitionOutcomes, RequestError> {
    match reply {
        ForwardReply::PartitionResults(results) => Ok(results
            .into_iter()
            .map(|(tp, result)| (tp, result.map_err(RequestError::Partition)))
            .collect()),
        other => Err(unexpected(&other)),
    }
}

fn unexpected(reply: &ForwardReply) -> RequestError {
    RequestError::Remote {
        code: codes::UNKNOWN_SERVER_ERROR,
        message: format!("unexpected controller reply {reply:?}"),
    }
}

/// The request methods of a type that implements [`Route`], written once for
/// `QuorumController`, `ControllerClient` and `ControllerHandle` (expand it inside the
/// type's `impl` block).
macro_rules! controller_requests {
    () => {
        /// Registers (or re-registers) a broker; returns its broker epoch.
        pub async fn register_broker(
            &self,
            broker_id: i32,
            incarnation: ::uuid::Uuid,
            listeners: Vec<$crate::record::Endpoint>,
            rack: Option<String>,
        ) -> Result<i64, $crate::quorum::RequestError> {
            $crate::quorum::api::register_broker(self, broker_id, incarnation, listeners, rack)
                .await
        }

        /// Keeps a broker's session alive; unfences it if it was fenced.
        pub async fn broker_heartbeat(
            &self,
            broker_id: i32,
            broker_epoch: i64,
        ) -> Result<$crate::quorum::HeartbeatReply, $crate::quorum::RequestError> {
            $crate::quorum::api::broker_heartbeat(self, broker_id, broker_epoch, None).await
        }

        /// A heartbeat that also reports the broker's traffic counters; the reply
        /// carries every broker's latest (`HeartbeatReply::traffic`).
        pub async fn broker_heartbeat_with_traffic(
            &self,
            broker_id: i32,
            broker_epoch: i64,
            traffic: $crate::quorum::BrokerTraffic,
        ) -> Result<$crate::quorum::HeartbeatReply, $crate::quorum::RequestError> {
            $crate::quorum::api::broker_heartbeat(self, broker_id, broker_epoch, Some(traffic))
                .await
        }

        /// Creates a topic (or only checks that it could be, with `validate_only`).
        pub async fn create_topic(
            &self,
            req: $crate::ops::CreateTopic,
            validate_only: bool,
        ) -> Result<$crate::image::TopicImage, $crate::quorum::RequestError> {
            $crate::quorum::api::create_topic(self, req, validate_only, false).await
        }

        /// Creates a coordinator's internal topic (`__consumer_offsets`,
        /// `__transaction_state`) on the broker's own behalf: the one way these topics
        /// come to exist, as a client's CreateTopics refuses them. Not for client requests.
        pub async fn create_internal_topic(
            &self,
            req: $crate::ops::CreateTopic,
        ) -> Result<$crate::image::TopicImage, $crate::quorum::RequestError> {
            $crate::quorum::api::create_topic(self, req, false, true).await
        }

        /// Deletes a topic; returns its id.
        pub async fn delete_topic(
            &self,
            name: &str,
        ) -> Result<::uuid::Uuid, $crate::quorum::RequestError> {
            $crate::quorum::api::delete_topic(self, name).await
        }

        /// Grows a topic to `new_total` partitions.
        pub async fn create_partitions(
            &self,
            name: &str,
            new_total: i32,
            validate_only: bool,
        ) -> Result<(), $crate::quorum::RequestError> {
            $crate::quorum::api::create_partitions(self, name, new_total, validate_only).await
        }

        /// Sets (`Some`) or removes (`None`) topic config overrides.
        pub async fn alter_topic_configs(
            &self,
            name: &str,
            changes: Vec<(String, Option<String>)>,
            validate_only: bool,
        ) -> Result<(), $crate::quorum::RequestError> {
            $crate::quorum::api::alter_topic_configs(self, name, changes, validate_only).await
        }

        /// Sets (`Some`) or removes (`None`) dynamic configs of one broker or of the
        /// cluster default.
        pub async fn alter_broker_configs(
            &self,
            resource: $crate::ConfigResource,
            changes: Vec<(String, Option<String>)>,
            validate_only: bool,
        ) -> Result<(), $crate::quorum::RequestError> {
            $crate::quorum::api::alter_broker_configs(self, resource, changes, validate_only).await
        }

        /// Hands a block of producer ids to a registered broker.
        pub async fn allocate_producer_ids(
            &self,
            broker_id: i32,
            broker_epoch: i64,
        ) -> Result<std::ops::Range<i64>, $crate::quorum::RequestError> {
            $crate::quorum::api::allocate_producer_ids(self, broker_id, broker_epoch).await
        }

        /// The quorum as the leader sees it (every voter's log end and lag).
        pub async fn describe_quorum(
            &self,
        ) -> Result<$crate::quorum::QuorumStatus, $crate::quorum::RequestError> {
            $crate::quorum::api::describe_quorum(self).await
        }

        /// An ISR change asked by the partition's leader (see `AlterPartition`);
        /// answers the partition as applied. Refused with FENCED_LEADER_EPOCH (74) or INVALID_UPDATE_VERSION (108)
        /// when based on an older state, INELIGIBLE_REPLICA (107) when an added member
        /// is fenced, shutting down or not a replica.
        pub async fn alter_partition(
            &self,
            req: $crate::quorum::AlterPartition,
        ) -> Result<$crate::image::PartitionImage, $crate::quorum::RequestError> {
            $crate::quorum::api::alter_partition(self, req).await
        }

        /// Moves the leaderships of a broker that is shutting down to other live ISR
        /// members and takes it out of ISRs that keep another member; answers how many
        /// leaderships it still holds (call again until 0).
        pub async fn controlled_shutdown(
            &self,
            broker_id: i32,
            broker_epoch: i64,
        ) -> Result<u32, $crate::quorum::RequestError> {
            $crate::quorum::api::controlled_shutdown(self, broker_id, broker_epoch, false).await
        }

        /// The end of a controlled shutdown that could not hand everything over (no
        /// other live in-sync replica): the broker leaves now, so it is fenced and the
        /// partitions it still leads get new leaders or go offline, rather than all
        /// that waiting for its session to expire. Answers the leaderships it held.
        pub async fn broker_exiting(
            &self,
            broker_id: i32,
            broker_epoch: i64,
        ) -> Result<u32, $crate::quorum::RequestError> {
            $crate::quorum::api::controlled_shutdown(self, broker_id, broker_epoch, true).await
        }

        /// ElectLeaders: per-partition results; with `None`, every partition, leaving
        /// out those that need no election.
        pub async fn elect_leaders(
            &self,
            kind: $crate::quorum::ElectionKind,
            partitions: Option<Vec<$crate::quorum::TopicPartition>>,
        ) -> Result<$crate::quorum::PartitionOutcomes, $crate::quorum::RequestError> {
            $crate::quorum::api::elect_leaders(self, kind, partitions).await
        }

        /// AlterPartitionReassignments: `Some(target)` moves a partition to `target`,
        /// `None` cancels its move in flight.
        pub async fn alter_reassignments(
            &self,
            changes: Vec<(String, i32, Option<Vec<i32>>)>,
        ) -> Result<$crate::quorum::PartitionOutcomes, $crate::quorum::RequestError> {
            $crate::quorum::api::alter_reassignments(self, changes).await
        }

        /// CreateAcls: per ACL, created (or already present) or why it is invalid.
        pub async fn create_acls(
            &self,
            acls: Vec<$crate::acl::AclEntry>,
        ) -> Result<Vec<Result<(), String>>, $crate::quorum::RequestError> {
            $crate::quorum::api::create_acls(self, acls).await
        }

        /// DeleteAcls: per filter, the ACLs removed or why the filter is invalid.
        pub async fn delete_acls(
            &self,
            filters: Vec<$crate::acl::AclFilter>,
        ) -> Result<Vec<Result<Vec<$crate::acl::AclEntry>, String>>, $crate::quorum::RequestError> {
            $crate::quorum::api::delete_acls(self, filters).await
        }

        /// ListPartitionReassignments: moves in flight (of the partitions named, or all).
        pub async fn list_reassignments(
            &self,
            partitions: Option<Vec<$crate::quorum::TopicPartition>>,
        ) -> Result<Vec<$crate::quorum::Reassignment>, $crate::quorum::RequestError> {
            $crate::quorum::api::list_reassignments(self, partitions).await
        }

        /// AlterUserScramCredentials: deletions `(user, mechanism type)` and
        /// upsertions (keys already derived); one `(user, code, message)` per user.
        pub async fn alter_scram_credentials(
            &self,
            deletions: Vec<(String, i8)>,
            upsertions: Vec<$crate::scram::ScramUpsertion>,
        ) -> Result<Vec<$crate::scram::ScramResult>, $crate::quorum::RequestError> {
            $crate::quorum::api::alter_scram_credentials(self, deletions, upsertions).await
        }

        /// AlterClientQuotas: one `(entity, code, message)` per entry, in order.
        pub async fn alter_client_quotas(
            &self,
            alterations: Vec<$crate::quota::QuotaAlteration>,
            validate_only: bool,
        ) -> Result<Vec<$crate::quota::QuotaResult>, $crate::quorum::RequestError> {
            $crate::quorum::api::alter_client_quotas(self, alterations, validate_only).await
        }
    };
}
pub(crate) use controller_requests;
