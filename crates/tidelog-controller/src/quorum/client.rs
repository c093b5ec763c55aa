//! [`ControllerClient`]: the controller requests from a node that runs a broker but no
//! controller voter (`--roles broker`). Any voter takes the request and, when it is
//! not the leader, forwards it there (one hop); the image is fetched from whichever
//! voter answers, with a long poll.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use uuid::Uuid;

use super::api::{self, PartitionOutcomes, Route};
use super::controller::HeartbeatReply;
use super::error::{QuorumError, RequestError};
use super::forward::{ForwardReply, ForwardedCall};
use super::network::{CallError, PeerConnection};
use super::peers::QuorumPeers;
use super::rpc::{RpcRequest, RpcResponse};
use super::QuorumStatus;
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::ops::{AlterPartition, CreateTopic, ElectionKind, Reassignment, TopicPartition};
use crate::record::Endpoint;
use crate::snapshot;

/// Idle connections kept per voter.
const MAX_IDLE: usize = 4;
/// Node id a non-voter puts in its requests (voters' ids are positive).
const CLIENT_NODE_ID: u64 = 0;

/// Talks to the controller quorum over its RPC port.
#[derive(Debug)]
pub struct ControllerClient {
    voters: Vec<(i32, String)>,
    cluster_id: String,
    /// Bound of one request (the voter may spend two write timeouts on it).
    timeout: Duration,
    /// Index into `voters` of the one that answered last.
    preferred: AtomicUsize,
    idle: Mutex<BTreeMap<i32, Vec<PeerConnection>>>,
}

impl ControllerClient {
    pub fn new(peers: &QuorumPeers, cluster_id: impl Into<String>, timeout: Duration) -> Self {
        ControllerClient {
            voters: peers.voters().map(|(id, a)| (id, a.to_owned())).collect(),
            cluster_id: cluster_id.into(),
            timeout,
            preferred: AtomicUsize::new(0),
            idle: Mutex::new(BTreeMap::new()),
        }
    }

    /// The quorum's image once it is newer than `after` (the offset of the image the
    /// caller has), waiting up to `max_wait` for a change; `None` if nothing changed.
    pub async fn fetch_image(
        &self,
        after: Option<u64>,
        max_wait: Duration,
    ) -> Result<Option<MetadataImage>, RequestError> {
        let max_wait_ms = u64::try_from(max_wait.as_millis()).unwrap_or(u64::MAX);
        let call = ForwardedCall::FetchImage { after, max_wait_ms };
        match self.send(call, self.timeout + max_wait).await? {
            ForwardReply::Image(None) => Ok(None),
            ForwardReply::Image(Some(bytes)) => {
                let source = Path::new("<controller rpc>");
                Ok(Some(snapshot::decode(source, &bytes, &self.cluster_id)?))
            }
            other => Err(RequestError::Remote {
                code: super::error::codes::UNKNOWN_SERVER_ERROR,
                message: format!("unexpected controller reply {other:?}"),
            }),
        }
    }

    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation: Uuid,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
    ) -> Result<i64, RequestError> {
        api::register_broker(self, broker_id, incarnation, listeners, rack).await
    }

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

    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Range<i64>, RequestError> {
        api::allocate_producer_ids(self, broker_id, broker_epoch).await
    }

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

    /// Tries the voter that answered last, then the others in order, until one
    /// answers. Errors the quorum answered with are returned as they are; only
    /// unreachable voters are skipped.
    async fn send(
        &self,
        call: ForwardedCall,
        timeout: Duration,
    ) -> Result<ForwardReply, RequestError> {
        let count = self.voters.len();
        let first = self.preferred.load(Ordering::Relaxed) % count.max(1);
        let mut last_error = RequestError::Quorum(QuorumError::NotController { leader: None });
        for step in 0..count {
            let index = (first + step) % count;
            let (id, addr) = &self.voters[index];
            let cached = lock(&self.idle).get_mut(id).and_then(Vec::pop);
            let mut conn = cached.unwrap_or_else(|| {
                PeerConnection::new(addr.clone(), self.cluster_id.clone(), CLIENT_NODE_ID)
            });
            match conn
                .call(RpcRequest::ClientCall(call.clone()), timeout)
                .await
            {
                Ok(RpcResponse::Forward(reply)) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    let mut idle = lock(&self.idle);
                    let pool = idle.entry(*id).or_default();
                    if pool.len() < MAX_IDLE {
                        pool.push(conn);
                    }
                    return match reply {
                        ForwardReply::Failed { code, message } => {
                            Err(RequestError::Remote { code, message })
                        }
                        reply => Ok(reply),
                    };
                }
                Ok(other) => {
                    last_error = RequestError::Remote {
                        code: super::error::codes::UNKNOWN_SERVER_ERROR,
                        message: format!("controller {id} answered {other:?}"),
                    };
                }
                Err(CallError::Timeout { timeout, .. }) => {
                    return Err(QuorumError::Timeout(timeout).into());
                }
                Err(e) => {
                    tracing::debug!(voter = id, error = %e, "controller voter unreachable");
                }
            }
        }
        Err(last_error)
    }
}

impl Route for ControllerClient {
    async fn route(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        self.send(call, self.timeout).await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
