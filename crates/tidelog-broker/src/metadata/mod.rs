//! The node's view of cluster metadata, and the one door through which it changes.
//!
//! Two backends, one interface for the handlers:
//! - a cluster of one: the controller runs in-process; every change goes through it
//!   (records appended to the local metadata log, then replayed), and afterwards the
//!   replica manager follows the new image at once;
//! - a cluster (`--quorum`): changes are requests to the controller quorum
//!   ([`ControllerHandle`]); the image arrives through the follower task (`cluster`), which
//!   opens and closes local partitions before it publishes the image, so a handler
//!   that sees a partition in the image also finds its log open.
//!
//! Handlers read a cheap shared snapshot ([`MetadataManager::image`]).

mod cluster;

pub(crate) use cluster::{controlled_shutdown, follow_image, heartbeat_loop};

use std::ops::Range;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tidelog_controller::quorum::{ControllerHandle, MetadataQuorum, RequestError};
use tidelog_controller::{Controller, CreateTopic, MetadataImage, TopicImage, Uuid};
use tokio::sync::watch;

use crate::context::BrokerContext;

/// How long a change made through the quorum waits for this node's image to show it
/// (so a client that asks for metadata right after its CreateTopics finds the topic).
const IMAGE_CATCH_UP: Duration = Duration::from_secs(5);

enum Backend {
    Local(Mutex<Controller>),
    Quorum(Arc<ControllerHandle>),
}

pub(crate) struct MetadataManager {
    backend: Backend,
    image: watch::Sender<Arc<MetadataImage>>,
    /// This node's registration epoch with the quorum; -1 until registered (and always
    /// on a cluster of one).
    broker_epoch: AtomicI64,
    /// The quorum leader as last learned by a broker-only node (-1: unknown).
    remote_leader: AtomicI32,
    /// The unused rest of the producer-id block the quorum gave this node.
    producer_ids: tokio::sync::Mutex<Range<i64>>,
}

impl MetadataManager {
    /// A cluster of one on the local controller.
    pub(crate) fn new(controller: Controller) -> Self {
        let image = controller.shared_image();
        Self::with_backend(Backend::Local(Mutex::new(controller)), image)
    }

    /// A node of a cluster, starting from `image` (a voter's own, or an empty one on a
    /// broker-only node until the first fetch).
    pub(crate) fn clustered(link: Arc<ControllerHandle>, image: Arc<MetadataImage>) -> Self {
        Self::with_backend(Backend::Quorum(link), image)
    }

    fn with_backend(backend: Backend, image: Arc<MetadataImage>) -> Self {
        MetadataManager {
            backend,
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

    /// The quorum this node talks to; `None` on a cluster of one.
    pub(crate) fn controller(&self) -> Option<Arc<ControllerHandle>> {
        match &self.backend {
            Backend::Local(_) => None,
            Backend::Quorum(link) => Some(Arc::clone(link)),
        }
    }

    /// This node's broker epoch (-1 on a cluster of one, or before registration).
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

    /// The node clients should treat as the controller. A cluster of one: this node.
    /// A cluster: the quorum leader when it is a live broker; when it runs no broker,
    /// this node (any broker takes controller requests and forwards them); -1 while no
    /// leader is known.
    pub(crate) fn controller_id(&self, node_id: i32) -> i32 {
        let leader = match &self.backend {
            Backend::Local(_) => return node_id,
            Backend::Quorum(link) => match &**link {
                ControllerHandle::Voter(c) => c.quorum().status().leader.unwrap_or(-1),
                ControllerHandle::Remote(_) => self.remote_leader.load(Ordering::Relaxed),
            },
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

    /// Publishes an image the replica manager already follows (cluster mode).
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
        ctx: &BrokerContext,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicImage, RequestError> {
        match &self.backend {
            Backend::Local(c) => Ok(self.change(c, ctx, |c| c.create_topic(req, validate_only))?),
            Backend::Quorum(link) => {
                let name = req.name.clone();
                let created = link.create_topic(req, validate_only).await?;
                if !validate_only {
                    let id = created.topic_id;
                    self.wait_for(IMAGE_CATCH_UP, |i| {
                        i.topic(&name).is_some_and(|t| t.topic_id == id)
                    })
                    .await;
                }
                Ok(created)
            }
        }
    }

    /// Deletes a topic; returns its id.
    pub(crate) async fn delete_topic(
        &self,
        ctx: &BrokerContext,
        name: &str,
    ) -> Result<Uuid, RequestError> {
        match &self.backend {
            Backend::Local(c) => Ok(self.change(c, ctx, |c| c.delete_topic(name))?),
            Backend::Quorum(link) => {
                let id = link.delete_topic(name).await?;
                self.wait_for(IMAGE_CATCH_UP, |i| i.topic_by_id(&id).is_none())
                    .await;
                Ok(id)
            }
        }
    }

    pub(crate) async fn create_partitions(
        &self,
        ctx: &BrokerContext,
        name: &str,
        new_total: i32,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        match &self.backend {
            Backend::Local(c) => Ok(self.change(c, ctx, |c| {
                c.create_partitions(name, new_total, validate_only)
            })?),
            Backend::Quorum(link) => {
                link.create_partitions(name, new_total, validate_only)
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
        }
    }

    /// Sets (`Some`) or removes (`None`) topic config overrides, all or none.
    pub(crate) async fn alter_topic_configs(
        &self,
        ctx: &BrokerContext,
        name: &str,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), RequestError> {
        match &self.backend {
            Backend::Local(c) => Ok(self.change(c, ctx, |c| {
                c.alter_topic_configs(name, changes, validate_only)
            })?),
            Backend::Quorum(link) => {
                let wanted = changes.clone();
                link.alter_topic_configs(name, changes, validate_only)
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
        }
    }

    /// A producer id never handed out before (from blocks the controller records).
    pub(crate) async fn allocate_producer_id(
        &self,
        ctx: &BrokerContext,
    ) -> Result<i64, RequestError> {
        match &self.backend {
            Backend::Local(c) => Ok(self.change(c, ctx, |c| c.allocate_producer_id())?),
            Backend::Quorum(link) => {
                let mut block = self.producer_ids.lock().await;
                if block.is_empty() {
                    *block = link
                        .allocate_producer_ids(ctx.node_id(), self.broker_epoch())
                        .await?;
                }
                let id = block.start;
                block.start += 1;
                Ok(id)
            }
        }
    }

    /// Runs a change on the local controller, publishes the new image, and makes the
    /// hosted partitions follow it. Returns what the change returned.
    fn change<T>(
        &self,
        controller: &Mutex<Controller>,
        ctx: &BrokerContext,
        f: impl FnOnce(&mut Controller) -> T,
    ) -> T {
        let mut controller = controller.lock().unwrap_or_else(|p| p.into_inner());
        let result = f(&mut controller);
        let image = controller.shared_image();
        self.image.send_replace(Arc::clone(&image));
        if let Err(e) = ctx.replicas.apply_image(&image, &ctx.config) {
            tracing::error!(error = %e, "applying metadata to local partitions failed");
        }
        result
    }
}

/// What a client is told when no producer id could be had: a disk failure of the local
/// controller, or a quorum that cannot write right now (retriable: the client asks again).
pub(crate) fn producer_id_error(e: &RequestError) -> i16 {
    match e {
        RequestError::Controller(_) => ResponseError::KafkaStorageError.code(),
        _ => ResponseError::CoordinatorNotAvailable.code(),
    }
}
