//! [`ControllerHandle`]: one type for the broker to talk to the controller quorum,
//! whether this node is a voter ([`QuorumController`]) or a broker-only node
//! ([`ControllerClient`]). Both variants go through the same typed requests of
//! `api.rs`, so a broker's code does not care which one it holds.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::api::{self, PartitionOutcomes, Route};
use super::client::ControllerClient;
use super::controller::{HeartbeatReply, QuorumController};
use super::error::RequestError;
use super::forward::{ForwardReply, ForwardedCall};
use super::{MetadataQuorum, QuorumStatus};
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::ops::{AlterPartition, CreateTopic, ElectionKind, Reassignment, TopicPartition};
use crate::record::Endpoint;

/// The controller as seen from a broker: a local voter or a remote quorum.
#[derive(Debug, Clone)]
pub enum ControllerHandle {
    /// This node is a controller voter; requests run here or are forwarded to the
    /// leader (one hop).
    Voter(Arc<QuorumController>),
    /// This node only runs a broker; requests go to the voters over their RPC port.
    Remote(Arc<ControllerClient>),
}

impl ControllerHandle {
    /// Registers (or re-registers) a broker; returns its broker epoch.
    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation: Uuid,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
    ) -> Result<i64, RequestError> {
        api::register_broker(self, broker_id, incarnation, listeners, rack).await
    }

    /// Keeps a broker's session alive; unfences it if it was fenced.
    pub async fn broker_heartbeat(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<HeartbeatReply, RequestError> {
        api::broker_heartbeat(self, broker_id, broker_epoch).await
    }

    pub async fn create_topic(
        &self,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicImage, RequestError> {
        api::create_topic(self, req, validate_only).await
    }

    /// Deletes a topic; returns its id.
    pub async fn delete_topic(&self, name: &str) -> Result<Uuid, RequestError> {
        api::delete_topic(self, name).await
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        new_total: i32,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        api::create_partitions(self, name, new_total, validate_only).await
    }

    pub async fn alter_topic_configs(
        &self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        api::alter_topic_configs(self, name, changes, validate_only).await
    }

    /// Hands a block of producer ids to a registered broker.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Range<i64>, RequestError> {
        api::allocate_producer_ids(self, broker_id, broker_epoch).await
    }

    /// The quorum as the leader sees it (every voter's log end and lag).
    pub async fn describe_quorum(&self) -> Result<QuorumStatus, RequestError> {
        api::describe_quorum(self).await
    }

    /// An ISR change asked by the partition's leader; answers the partition as
    /// applied (FENCED_LEADER_EPOCH 74, INVALID_UPDATE_VERSION 108,
    /// INELIGIBLE_REPLICA 107 when refused).
    pub async fn alter_partition(
        &self,
        req: AlterPartition,
    ) -> Result<PartitionImage, RequestError> {
        api::alter_partition(self, req).await
    }

    /// Moves a shutting-down broker's leaderships away; answers how many it still
    /// holds (call again until 0).
    pub async fn controlled_shutdown(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<u32, RequestError> {
        api::controlled_shutdown(self, broker_id, broker_epoch).await
    }

    /// ElectLeaders: per-partition results (with `None`, every partition that needed
    /// an election).
    pub async fn elect_leaders(
        &self,
        kind: ElectionKind,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<PartitionOutcomes, RequestError> {
        api::elect_leaders(self, kind, partitions).await
    }

    /// `Some(target)` moves a partition's replicas to `target`; `None` cancels.
    pub async fn alter_reassignments(
        &self,
        changes: Vec<(String, i32, Option<Vec<i32>>)>,
    ) -> Result<PartitionOutcomes, RequestError> {
        api::alter_reassignments(self, changes).await
    }

    /// Reassignments in flight (of the partitions named, or all).
    pub async fn list_reassignments(
        &self,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<Reassignment>, RequestError> {
        api::list_reassignments(self, partitions).await
    }

    /// The metadata image once it is newer than `after` (the last offset of the image
    /// the caller has), waiting up to `max_wait`; `None` if nothing newer came.
    /// A voter waits on its own image; a remote handle long-polls a voter.
    pub async fn image_after(
        &self,
        after: Option<u64>,
        max_wait: Duration,
    ) -> Result<Option<Arc<MetadataImage>>, RequestError> {
        match self {
            ControllerHandle::Voter(controller) => {
                let mut images = controller.quorum().watch_image();
                let _ = tokio::time::timeout(
                    max_wait,
                    images.wait_for(|image| image.last_offset() > after),
                )
                .await;
                let image = controller.image();
                Ok((image.last_offset() > after).then_some(image))
            }
            ControllerHandle::Remote(client) => {
                Ok(client.fetch_image(after, max_wait).await?.map(Arc::new))
            }
        }
    }

    /// The same as [`ControllerHandle::image_after`] (the name `ControllerClient` uses).
    pub async fn fetch_image(
        &self,
        after: Option<u64>,
        max_wait: Duration,
    ) -> Result<Option<Arc<MetadataImage>>, RequestError> {
        self.image_after(after, max_wait).await
    }
}

impl Route for ControllerHandle {
    async fn route(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        match self {
            ControllerHandle::Voter(controller) => controller.route(call).await,
            ControllerHandle::Remote(client) => client.route(call).await,
        }
    }
}

impl From<Arc<QuorumController>> for ControllerHandle {
    fn from(controller: Arc<QuorumController>) -> Self {
        ControllerHandle::Voter(controller)
    }
}

impl From<Arc<ControllerClient>> for ControllerHandle {
    fn from(client: Arc<ControllerClient>) -> Self {
        ControllerHandle::Remote(client)
    }
}
