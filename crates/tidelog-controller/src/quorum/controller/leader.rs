//! The leader's side of [`QuorumController`]: requests run here (broker sessions
//! are in `sessions.rs`, partition requests in `partitions.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::time::Duration;

use uuid::Uuid;

use super::{lock, QuorumController};
use crate::image::MetadataImage;
use crate::ops::{self, CreateTopic};
use crate::quorum::error::{codes, QuorumError, RequestError};
use crate::quorum::forward::{ForwardReply, ForwardedCall};
use crate::quorum::server::ForwardHandler;
use crate::quorum::{MetadataQuorum, QuorumRole};
use crate::record::MetadataRecord;
use crate::snapshot;

/// Longest a FetchImage request waits for a newer image.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(10);

impl QuorumController {
    /// Runs `call` on this node, which must be the leader.
    /// This voter's image once it is newer than `after`, waiting at most
    /// `max_wait_ms` (capped at [`MAX_FETCH_WAIT`]).
    async fn fetch_image(
        &self,
        after: Option<u64>,
        max_wait_ms: u64,
    ) -> Result<ForwardReply, RequestError> {
        let wait = Duration::from_millis(max_wait_ms).min(MAX_FETCH_WAIT);
        let mut images = self.quorum.watch_image();
        let _ = tokio::time::timeout(wait, images.wait_for(|i| i.last_offset() > after)).await;
        let image = self.quorum.image();
        if image.last_offset() <= after {
            return Ok(ForwardReply::Image(None));
        }
        Ok(ForwardReply::Image(Some(snapshot::encode(&image)?)))
    }

    pub(super) async fn execute(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        match call {
            ForwardedCall::BrokerHeartbeat {
                broker_id,
                broker_epoch,
                traffic,
            } => self.heartbeat_here(broker_id, broker_epoch, traffic).await,
            ForwardedCall::DescribeQuorum => {
                let status = self.quorum.status();
                // The leader's view when there is one; with none known (an election, or
                // no majority left) this voter's own, which names no leader.
                if status.role != QuorumRole::Leader && status.leader.is_some() {
                    return Err(QuorumError::NotController {
                        leader: status.leader,
                    }
                    .into());
                }
                Ok(ForwardReply::Status(status))
            }
            ForwardedCall::FetchImage { after, max_wait_ms } => {
                self.fetch_image(after, max_wait_ms).await
            }
            other => self.write_here(other).await,
        }
    }

    async fn write_here(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        let mut cursor = self.writer.lock().await;
        self.quorum.sync_leader().await?;
        let image = self.quorum.image();
        let placement = *cursor.get_or_insert(image.topic_count());
        let (records, reply) = match call {
            ForwardedCall::RegisterBroker {
                broker_id,
                incarnation,
                listeners,
                rack,
            } => {
                let epoch = image
                    .last_offset()
                    .map_or(0, |o| i64::try_from(o + 1).unwrap_or(i64::MAX));
                let plan = ops::plan_register_broker(
                    &image,
                    broker_id,
                    incarnation,
                    epoch,
                    listeners,
                    rack,
                );
                let mut records = plan.records;
                let epoch = match records.first() {
                    Some(_) => epoch,
                    None => image.broker(broker_id).map_or(epoch, |b| b.epoch),
                };
                let restarted = image
                    .broker(broker_id)
                    .is_some_and(|b| b.incarnation != incarnation);
                if !records.is_empty() {
                    if restarted {
                        // A new process: it lost whatever it led and stays fenced until
                        // its first heartbeat, like a broker whose session expired.
                        records.push(MetadataRecord::FenceBroker { broker_id, epoch });
                    }
                    // (A registration also unfences: offline partitions may get it back.)
                    records.extend(self.repairs_after(&image, &records));
                }
                if restarted {
                    tracing::info!(
                        broker_id,
                        epoch,
                        "broker restarted: fenced until it heartbeats, its leaderships re-elected"
                    );
                }
                let mut sessions = lock(&self.sessions);
                sessions.heard(broker_id, self.clock.now());
                sessions.shutting_down.remove(&broker_id);
                drop(sessions);
                (records, ForwardReply::BrokerEpoch(epoch))
            }
            ForwardedCall::CreateTopic {
                name,
                num_partitions,
                replication_factor,
                assignments,
                configs,
                validate_only,
                internal,
            } => {
                let req = CreateTopic {
                    name,
                    num_partitions,
                    replication_factor,
                    assignments,
                    configs,
                };
                let topic_id = fresh_topic_id(&image);
                let plan_create = if internal {
                    ops::plan_create_internal_topic
                } else {
                    ops::plan_create_topic
                };
                let plan = plan_create(&image, &req, self.defaults, topic_id, placement)?;
                if validate_only {
                    return Ok(ForwardReply::Topic(plan.response));
                }
                *cursor = Some(placement.wrapping_add(1));
                (plan.records, ForwardReply::Topic(plan.response))
            }
            ForwardedCall::DeleteTopic { name } => {
                let plan = ops::plan_delete_topic(&image, &name)?;
                (plan.records, ForwardReply::TopicId(plan.response))
            }
            ForwardedCall::CreatePartitions {
                name,
                new_total,
                validate_only,
            } => {
                let plan = ops::plan_create_partitions(&image, &name, new_total, placement)?;
                let records = if validate_only {
                    Vec::new()
                } else {
                    plan.records
                };
                (records, ForwardReply::Done)
            }
            ForwardedCall::AlterTopicConfigs {
                name,
                changes,
                validate_only,
            } => {
                let plan = ops::plan_alter_topic_configs(&image, &name, &changes)?;
                let records = if validate_only {
                    Vec::new()
                } else {
                    plan.records
                };
                (records, ForwardReply::Done)
            }
            ForwardedCall::AlterBrokerConfigs {
                resource,
                changes,
                validate_only,
            } => {
                let plan = ops::plan_alter_broker_configs(&image, &resource, &changes)?;
                let records = if validate_only {
                    Vec::new()
                } else {
                    plan.records
                };
                (records, ForwardReply::Done)
            }
            ForwardedCall::AllocateProducerIds {
                broker_id,
                broker_epoch,
            } => {
                check_epoch(&image, broker_id, broker_epoch)?;
                let plan = ops::plan_producer_id_block(&image, broker_id, broker_epoch)?;
                let block = plan.response;
                (
                    plan.records,
                    ForwardReply::ProducerIds {
                        start: block.start,
                        end: block.end,
                    },
                )
            }
            ForwardedCall::AlterScramCredentials {
                deletions,
                upsertions,
            } => {
                let plan =
                    crate::scram::plan_alter_scram_credentials(&image, &deletions, &upsertions);
                (plan.records, ForwardReply::ScramResults(plan.response))
            }
            ForwardedCall::AlterClientQuotas {
                alterations,
                validate_only,
            } => {
                let plan =
                    crate::quota::plan_alter_client_quotas(&image, &alterations, validate_only);
                (plan.records, ForwardReply::QuotaResults(plan.response))
            }
            ForwardedCall::CreateAcls { acls } => {
                let plan = ops::plan_create_acls(&image, &acls, Uuid::new_v4);
                let outcomes = plan
                    .response
                    .into_iter()
                    .map(|r| r.map_err(|e| e.0))
                    .collect();
                (plan.records, ForwardReply::AclsCreated(outcomes))
            }
            ForwardedCall::DeleteAcls { filters } => {
                let plan = ops::plan_delete_acls(&image, &filters);
                let outcomes = plan
                    .response
                    .into_iter()
                    .map(|r| r.map_err(|e| e.0))
                    .collect();
                (plan.records, ForwardReply::AclsDeleted(outcomes))
            }
            call @ (ForwardedCall::AlterPartition(_)
            | ForwardedCall::ControlledShutdown { .. }
            | ForwardedCall::ElectLeaders { .. }
            | ForwardedCall::AlterReassignments { .. }
            | ForwardedCall::ListReassignments { .. }) => self.plan_partition_call(&image, call)?,
            ForwardedCall::BrokerHeartbeat { .. }
            | ForwardedCall::DescribeQuorum
            | ForwardedCall::FetchImage { .. } => {
                return Err(RequestError::Remote {
                    code: codes::UNKNOWN_SERVER_ERROR,
                    message: "not a write".to_owned(),
                })
            }
        };
        if !records.is_empty() {
            self.quorum.propose(records).await?;
        }
        Ok(match reply {
            // Answer with the topic as applied (the same unless replay disagreed).
            ForwardReply::Topic(planned) => ForwardReply::Topic(
                self.quorum
                    .image()
                    .topic(&planned.name)
                    .cloned()
                    .unwrap_or(planned),
            ),
            other => other,
        })
    }
}

pub(super) struct Handler(pub(super) Weak<QuorumController>);

impl ForwardHandler for Handler {
    fn heartbeat_connection_closed(&self, brokers: &[i32]) {
        if let Some(controller) = self.0.upgrade() {
            controller.connection_closed(brokers);
        }
    }

    fn handle(
        &self,
        call: ForwardedCall,
        may_forward: bool,
    ) -> Pin<Box<dyn Future<Output = ForwardReply> + Send + '_>> {
        Box::pin(async move {
            let Some(controller) = self.0.upgrade() else {
                return ForwardReply::Failed {
                    code: codes::NOT_CONTROLLER,
                    message: "the controller is shut down".to_owned(),
                };
            };
            // One hop only: a request a voter forwarded is never forwarded again.
            let result = if may_forward {
                controller.call(call).await
            } else {
                controller.execute(call).await
            };
            match result {
                Ok(reply) => reply,
                Err(e) => ForwardReply::Failed {
                    code: e.error_code(),
                    message: e.to_string(),
                },
            }
        })
    }
}

pub(super) fn check_epoch(
    image: &MetadataImage,
    broker_id: i32,
    epoch: i64,
) -> Result<(), RequestError> {
    match image.broker(broker_id) {
        None => Err(RequestError::BrokerNotRegistered { broker_id }),
        Some(b) if b.epoch != epoch => Err(RequestError::StaleBrokerEpoch {
            broker_id,
            given: epoch,
            current: b.epoch,
        }),
        Some(_) => Ok(()),
    }
}

fn fresh_topic_id(image: &MetadataImage) -> Uuid {
    loop {
        let id = Uuid::new_v4();
        // Kafka reserves the nil id and id 1 (the metadata topic's).
        if id.as_u128() > 1 && image.topic_by_id(&id).is_none() {
            return id;
        }
    }
}
