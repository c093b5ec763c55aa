//! [`ControllerClient`]: the controller requests from a node that runs a broker but no
//! controller voter (`--roles broker`). Any voter takes the request and, when it is
//! not the leader, forwards it there (one hop); the image is fetched from whichever
//! voter answers, with a long poll.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidelog_env::net::{TcpTransport, Transport};

use super::api::Route;
use super::error::{QuorumError, RequestError};
use super::forward::{ForwardReply, ForwardedCall};
use super::network::{CallError, PeerConnection};
use super::peers::QuorumPeers;
use super::rpc::{RpcRequest, RpcResponse};
use crate::image::MetadataImage;
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
    transport: Arc<dyn Transport>,
}

impl ControllerClient {
    /// A client that reaches the voters over TCP.
    pub fn new(peers: &QuorumPeers, cluster_id: impl Into<String>, timeout: Duration) -> Self {
        ControllerClient {
            voters: peers.voters().map(|(id, a)| (id, a.to_owned())).collect(),
            cluster_id: cluster_id.into(),
            timeout,
            preferred: AtomicUsize::new(0),
            idle: Mutex::new(BTreeMap::new()),
            transport: Arc::new(TcpTransport),
        }
    }

    /// The same client, reaching the voters over `transport` instead.
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.transport = transport;
        self
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

    super::api::controller_requests!();

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
                PeerConnection::new(
                    Arc::clone(&self.transport),
                    addr.clone(),
                    self.cluster_id.clone(),
                    CLIENT_NODE_ID,
                )
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
