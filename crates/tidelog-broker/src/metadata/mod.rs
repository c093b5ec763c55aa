//! The node's view of cluster metadata, and the one door through which it changes.
//!
//! Every change is a request to the controller quorum ([`ControllerHandle`]): this
//! node's own voter (a single node is a one-voter quorum of itself) or, on a
//! broker-only node, the voters over their controller port. The image arrives through
//! the follower task (`cluster`), which opens and closes local partitions before it
//! publishes the image, so a handler that sees a partition in the image also finds its
//! log open; a change returns once this node's image shows it.
//!
//! Handlers read a cheap shared snapshot ([`MetadataManager::image`]).

mod cluster;

pub(crate) use cluster::{controlled_shutdown, follow_image, heartbeat_loop};

use std::ops::Range;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tidelog_controller::acl::{AclEntry, AclFilter};
use tidelog_controller::quorum::{ControllerHandle, MetadataQuorum, RequestError};
use tidelog_controller::{ConfigResource, CreateTopic, MetadataImage, TopicImage, Uuid};
use tokio::sync::watch;

/// How long a change made through the quorum waits for this node's image to show it
/// (so a client that asks for metadata right after its CreateTopics finds the topic).
const IMAGE_CATCH_UP: Duration = Duration::from_secs(5);

pub(crate) struct MetadataManager {
    link: Arc<ControllerHandle>,
    image: watch::Sender<Arc<MetadataImage>>,
    /// This node's registration epoch with the quorum; -1 until registered.
    broker_epoch: AtomicI64,
    /// The quorum leader as last learned by a broker-only node (-1: unknown).
    remote_leader: AtomicI32,
    /// The unused rest of the producer-id block the quorum gave this node.
    producer_ids: tokio::sync::Mutex<Range<i64>>,
}

impl MetadataManager {
    /// A node of a cluster (possibly a cluster of one), starting from `image` (a voter's
    /// own, or an empty one on a broker-only node until the first fetch).
    pub(crate) fn new(link: Arc<ControllerHandle>, image: Arc<MetadataImage>) -> Self {
        MetadataManager {
            link,
            image: watch::Sender::new(image),
            broker_epoch: AtomicI64::new(-1),
            remote_leader: AtomicI32::new(-1),
            producer_ids: tokio::sync::Mutex::new(0..0),
        }
    }

    /// The latest metadata image.
    pub(crate) fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.borrow())
    }

    /// Every image from now on (the coordinators follow it).
    pub(crate) fn images(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.subscribe()
    }

    /// The quorum this node talks to.
    pub(crate) fn controller(&self) -> &Arc<ControllerHandle> {
        &self.link
    }

    /// This node's broker epoch (-1 before registration).
    pub(crate) fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    pub(crate) fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    pub(crate) fn set_remote_leader(&self, leader: Option<i32>) {
        self.remote_leader
            .store(leader.unwrap_or(-1), Ordering::Relaxed);
    }

    /// The node clients should treat as the controller: the quorum leader when it is a
    /// live broker; when it runs no broker, this node (any broker takes controller
    /// requests and forwards them); -1 while no leader is known.
    pub(crate) fn controller_id(&self, node_id: i32) -> i32 {
        let leader = match &*self.link {
            ControllerHandle::Voter(c) => c.quorum().status().leader.unwrap_or(-1),
            ControllerHandle::Remote(_) => self.remote_leader.load(Ordering::Relaxed),
        };
        if leader < 0 {
            return -1;
        }
        let image = self.image();
        match image.broker(leader) {
            Some(b) if !b.fenced => leader,
            _ => node_id,
        }
    }

    /// Publishes an image the replica manager already follows.
    pub(crate) fn publish(&self, image: Arc<MetadataImage>) {
        self.image.send_replace(image);
    }

    /// Waits (bounded) until the published image satisfies `done`.
    pub(crate) async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&MetadataImage) -> bool,
    ) -> bool {
        let mut rx = self.image.subscribe();
        let outcome = tokio::time::timeout(timeout, rx.wait_for(|image| done(image))).await;
        matches!(outcome, Ok(Ok(_)))
    }

    /// Creates a topic (or, with `validate_only`, checks it could be).
    pub(crate) async fn create_topic(
        &self,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicImage, RequestError> {
        let created = self.link.create_topic(req, validate_only).await?;
        if !validate_only {
            self.wait_for_topic(&created).await;
        }
        Ok(created)
    }

    /// Creates a coordinator's internal topic on this broker's own behalf (see
    /// `internal_topic::create_if_missing`); client requests never come this way.
    pub(crate) async fn create_internal_topic(
        &self,
        req: CreateTopic,
    ) -> Result<TopicImage, RequestError> {
        let created = self.link.create_internal_topic(req).await?;
        self.wait_for_topic(&created).await;
        Ok(created)
    }

    async fn wait_for_topic(&self, created: &TopicImage) {
        let (name, id) = (created.name.as_str(), created.topic_id);
        self.wait_for(IMAGE_CATCH_UP, |i| {
            i.topic(name).is_some_and(|t| t.topic_id == id)
        })
        .await;
    }

    /// Waits (bounded) until the image has a topic called `name`, whoever created it.
    pub(crate) async fn wait_for_topic_named(&self, name: &str) -> bool {
        self.wait_for(IMAGE_CATCH_UP, |i| i.topic(name).is_some())
            .await
    }

    /// Deletes a topic; returns its id.
    pub(crate) async fn delete_topic(&self, name: &str) -> Result<Uuid, RequestError> {
        let id = self.link.delete_topic(name).await?;
        self.wait_for(IMAGE_CATCH_UP, |i| i.topic_by_id(&id).is_none())
            .await;
        Ok(id)
    }

    pub(crate) async fn create_partitions(
        &self,
        name: &str,
        new_total: i32,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        self.link
            .create_partitions(name, new_total, validate_only)
            .await?;
        if !validate_only {
            self.wait_for(IMAGE_CATCH_UP, |i| {
                i.topic(name)
                    .is_some_and(|t| t.partition_count() >= new_total)
            })
            .await;
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) topic config overrides, all or none.
    pub(crate) async fn alter_topic_configs(
        &self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        let wanted = changes.clone();
        self.link
            .alter_topic_configs(name, changes, validate_only)
            .await?;
        if !validate_only {
            self.wait_for(IMAGE_CATCH_UP, |i| {
                let configs = i.topic_configs(name);
                wanted
                    .iter()
                    .all(|(k, v)| configs.get(k).map(String::as_str) == v.as_deref())
            })
            .await;
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) dynamic configs of one broker or of the
    /// cluster default, all or none; waits (bounded) until this node's image shows
    /// them, so a DescribeConfigs right after sees the change.
    pub(crate) async fn alter_broker_configs(
        &self,
        resource: ConfigResource,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        let wanted = changes.clone();
        let target = resource.clone();
        self.link
            .alter_broker_configs(resource, changes, validate_only)
            .await?;
        if !validate_only {
            self.wait_for(IMAGE_CATCH_UP, |i| {
                let configs = match &target {
                    ConfigResource::Broker(id) => i.broker_configs(*id),
                    ConfigResource::Group(group) => {
                        i.group_configs(group).cloned().unwrap_or_default()
                    }
                    _ => i.cluster_configs().clone(),
                };
                wanted
                    .iter()
                    .all(|(k, v)| configs.get(k).map(String::as_str) == v.as_deref())
            })
            .await;
        }
        Ok(())
    }

    /// CreateAcls through the quorum; waits (bounded) until this node's image has the
    /// ACLs created, so a DescribeAcls right after finds them.
    pub(crate) async fn create_acls(
        &self,
        acls: Vec<AclEntry>,
    ) -> Result<Vec<Result<(), String>>, RequestError> {
        let outcomes = self.link.create_acls(acls.clone()).await?;
        let created: Vec<AclEntry> = acls
            .into_iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| outcome.is_ok())
            .map(|(acl, _)| acl)
            .collect();
        self.wait_for(IMAGE_CATCH_UP, |i| {
            created
                .iter()
                .all(|acl| i.acls().values().any(|a| a == acl))
        })
        .await;
        Ok(outcomes)
    }

    /// DeleteAcls through the quorum; waits (bounded) until this node's image no longer
    /// has the ACLs removed.
    pub(crate) async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Result<Vec<AclEntry>, String>>, RequestError> {
        let outcomes = self.link.delete_acls(filters).await?;
        let removed: Vec<&AclEntry> = outcomes.iter().flatten().flatten().collect();
        self.wait_for(IMAGE_CATCH_UP, |i| {
            removed
                .iter()
                .all(|acl| !i.acls().values().any(|a| a == *acl))
        })
        .await;
        Ok(outcomes)
    }

    /// A producer id never handed out before (from blocks the controller records).
    pub(crate) async fn allocate_producer_id(&self, node_id: i32) -> Result<i64, RequestError> {
        let mut block = self.producer_ids.lock().await;
        if block.is_empty() {
            *block = self
                .link
                .allocate_producer_ids(node_id, self.broker_epoch())
                .await?;
        }
        let id = block.start;
        block.start += 1;
        Ok(id)
    }
}

/// What a client is told when no producer id could be had: a disk failure of the
/// controller, or a quorum that cannot write right now (retriable: the client asks again).
pub(crate) fn producer_id_error(e: &RequestError) -> i16 {
    match e {
        RequestError::Controller(_) => ResponseError::KafkaStorageError.code(),
        _ => ResponseError::CoordinatorNotAvailable.code(),
    }
}
