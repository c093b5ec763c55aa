//! Inbound RPCs on the `--controller-listen` address (a TCP listener, or one of a
//! test's in-memory network).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openraft::Raft;
use tidelog_env::net::{BoxConnection, Listener};
use tokio::io::BufStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::forward::{ForwardReply, ForwardedCall};
use super::rpc::{self, RpcEnvelope, RpcRequest, RpcResponse, WireError};
use super::state_machine::MAX_SNAPSHOT_BYTES;
use super::types::{NodeId, TypeConfig};

/// Inbound connections served at once; voters need one each (plus forwarding), so
/// this only bounds what a misbehaving client can take.
const MAX_CONNECTIONS: usize = 64;

/// Handles a controller request from another voter or a broker-only node (the
/// controller registers itself here once it exists). `may_forward`: whether this
/// voter may send the call on to its leader.
pub(crate) trait ForwardHandler: Send + Sync + 'static {
    fn handle(
        &self,
        call: ForwardedCall,
        may_forward: bool,
    ) -> Pin<Box<dyn Future<Output = ForwardReply> + Send + '_>>;

    /// The peer of a connection that carried heartbeats of `brokers` (sent by that
    /// broker's own node) closed it or reset it: the broker's process may be gone.
    fn heartbeat_connection_closed(&self, _brokers: &[i32]) {}
}

/// Brokers remembered per connection as having heartbeated on it; a node sends its
/// own broker's, so one is the norm.
const MAX_HEARTBEAT_BROKERS_PER_CONNECTION: usize = 4;

pub(crate) struct ServerShared {
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) cluster_id: String,
    pub(crate) forward: OnceLock<Arc<dyn ForwardHandler>>,
}

/// Accepts connections until `shutdown` flips (or its sender is dropped), then closes
/// every connection it opened.
pub(crate) async fn serve(
    mut listener: Box<dyn Listener>,
    shared: Arc<ServerShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
                        tracing::warn!(%peer, "too many controller connections; closing this one");
                        continue;
                    };
                    tasks.spawn(serve_connection(stream, peer, Arc::clone(&shared), permit));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "controller listener accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    tasks.shutdown().await;
}

async fn serve_connection(
    stream: BoxConnection,
    peer: std::net::SocketAddr,
    shared: Arc<ServerShared>,
    _permit: OwnedSemaphorePermit,
) {
    let mut stream = BufStream::new(stream);
    let mut heartbeats: Vec<i32> = Vec::new();
    let peer_gone = |heartbeats: &[i32]| {
        if let (false, Some(handler)) = (heartbeats.is_empty(), shared.forward.get()) {
            handler.heartbeat_connection_closed(heartbeats);
        }
    };
    loop {
        let envelope: RpcEnvelope =
            match tokio::time::timeout(rpc::IDLE_TIMEOUT, rpc::read_message(&mut stream)).await {
                Ok(Ok(envelope)) => envelope,
                // Idle too long: this side closes; the peer is not known to be gone.
                Err(_) => return,
                Ok(Err(WireError::Closed | WireError::Io(_))) => {
                    peer_gone(&heartbeats);
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "dropping a controller connection");
                    return;
                }
            };
        if let Some(broker_id) = own_heartbeat(&envelope) {
            if !heartbeats.contains(&broker_id)
                && heartbeats.len() < MAX_HEARTBEAT_BROKERS_PER_CONNECTION
            {
                heartbeats.push(broker_id);
            }
        }
        let response = if envelope.cluster_id == shared.cluster_id {
            dispatch(&shared, envelope.from, envelope.request).await
        } else {
            tracing::warn!(%peer, theirs = %envelope.cluster_id, "request for another cluster refused");
            RpcResponse::Refused(format!(
                "this controller belongs to cluster {}, not {}",
                shared.cluster_id, envelope.cluster_id
            ))
        };
        let frame = match rpc::encode(&response) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "controller response could not be encoded");
                return;
            }
        };
        if rpc::write_frame(&mut stream, &frame).await.is_err() {
            peer_gone(&heartbeats);
            return;
        }
    }
}

/// The broker whose heartbeat `envelope` carries, when the sender is that broker's own
/// node: a voter forwarding its own broker's (`from` is the broker id), or a broker-only
/// node calling directly. A voter relaying another node's heartbeat does not count: its
/// connection closing says nothing about that broker.
fn own_heartbeat(envelope: &RpcEnvelope) -> Option<i32> {
    match &envelope.request {
        RpcRequest::Forward(ForwardedCall::BrokerHeartbeat { broker_id, .. })
            if u64::try_from(*broker_id).ok() == Some(envelope.from) =>
        {
            Some(*broker_id)
        }
        RpcRequest::ClientCall(ForwardedCall::BrokerHeartbeat { broker_id, .. }) => {
            Some(*broker_id)
        }
        _ => None,
    }
}

async fn dispatch(shared: &ServerShared, from: NodeId, request: RpcRequest) -> RpcResponse {
    match request {
        RpcRequest::ElectNow { term } => RpcResponse::ElectNow(elect_now(shared, from, term).await),
        RpcRequest::AppendEntries(req) => {
            RpcResponse::AppendEntries(shared.raft.append_entries(req).await)
        }
        RpcRequest::Vote(req) => RpcResponse::Vote(shared.raft.vote(req).await),
        RpcRequest::InstallSnapshot(req) => {
            // openraft writes each chunk at its declared offset into a growable buffer:
            // bound the end before it allocates.
            let end = req.offset.saturating_add(req.data.len() as u64);
            if end > MAX_SNAPSHOT_BYTES {
                return RpcResponse::Refused(format!(
                    "snapshot chunk ends at byte {end}, beyond the limit of {MAX_SNAPSHOT_BYTES}"
                ));
            }
            RpcResponse::InstallSnapshot(shared.raft.install_snapshot(req).await)
        }
        RpcRequest::Forward(call) => forward(shared, call, false).await,
        RpcRequest::ClientCall(call) => forward(shared, call, true).await,
    }
}

async fn forward(shared: &ServerShared, call: ForwardedCall, may_forward: bool) -> RpcResponse {
    match shared.forward.get() {
        Some(handler) => RpcResponse::Forward(handler.handle(call, may_forward).await),
        None => RpcResponse::Refused("no controller runs on this node yet".to_owned()),
    }
}

/// A leader handing over before it stops asks this voter to stand: done only when the
/// request comes from the leader of the term this voter follows, and this voter holds
/// every entry of that leader's log it has been told of (its vote request carries its
/// log, which the other voters check anyway).
async fn elect_now(shared: &ServerShared, from: NodeId, term: u64) -> bool {
    let metrics = shared.raft.metrics().borrow().clone();
    let follows_sender = metrics.state == openraft::ServerState::Follower
        && metrics.current_term == term
        && metrics.current_leader == Some(from);
    if !follows_sender {
        tracing::debug!(
            from,
            term,
            "leadership hand-over refused: not following that leader"
        );
        return false;
    }
    match shared.raft.trigger().elect().await {
        Ok(()) => {
            tracing::info!(
                from,
                term,
                "controller leader hands over: standing for election"
            );
            true
        }
        Err(e) => {
            tracing::debug!(error = %e, "leadership hand-over: election not started");
            false
        }
    }
}
