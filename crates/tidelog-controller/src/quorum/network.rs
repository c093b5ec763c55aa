//! Outbound RPCs: openraft's `RaftNetwork` over one connection per peer (TCP, or the
//! in-memory network of a test: whatever the voter's transport is).
//!
//! A connection is opened on first use and dropped on any error or timeout (the next
//! call reconnects), so a peer that died and came back is reached again without
//! special handling. Every call is bounded by openraft's per-RPC deadline.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use tidelog_env::net::{BoxConnection, Transport};
use tokio::io::BufStream;

use super::rpc::{self, RpcEnvelope, RpcRequest, RpcResponse, WireError};
use super::types::{NodeId, TypeConfig};

/// Why a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("request too large for one frame")]
    TooLarge,
    #[error("{0}")]
    Wire(#[from] WireError),
}

/// One cached connection to one peer; used by the Raft network and by forwarding.
pub(crate) struct PeerConnection {
    pub(crate) addr: String,
    cluster_id: String,
    from: NodeId,
    transport: Arc<dyn Transport>,
    stream: Option<BufStream<BoxConnection>>,
}

impl std::fmt::Debug for PeerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConnection")
            .field("addr", &self.addr)
            .field("connected", &self.stream.is_some())
            .finish_non_exhaustive()
    }
}

impl PeerConnection {
    pub(crate) fn new(
        transport: Arc<dyn Transport>,
        addr: String,
        cluster_id: String,
        from: NodeId,
    ) -> Self {
        PeerConnection {
            addr,
            cluster_id,
            from,
            transport,
            stream: None,
        }
    }

    /// Sends `request` and waits for the answer, all within `timeout`.
    pub(crate) async fn call(
        &mut self,
        request: RpcRequest,
        timeout: Duration,
    ) -> Result<RpcResponse, CallError> {
        let envelope = RpcEnvelope {
            cluster_id: self.cluster_id.clone(),
            from: self.from,
            request,
        };
        let frame = match rpc::encode(&envelope) {
            Ok(frame) => frame,
            Err(WireError::BadLength(_)) => return Err(CallError::TooLarge),
            Err(e) => return Err(e.into()),
        };
        let result = tokio::time::timeout(timeout, self.exchange(&frame)).await;
        match result {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                // The answer may still arrive on this stream; it must not be read as
                // the answer to the next request.
                self.stream = None;
                Err(CallError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                })
            }
        }
    }

    async fn exchange(&mut self, frame: &[u8]) -> Result<RpcResponse, CallError> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => {
                let connection = self.transport.connect(&self.addr).await.map_err(|source| {
                    CallError::Connect {
                        addr: self.addr.clone(),
                        source,
                    }
                })?;
                self.stream.insert(BufStream::new(connection))
            }
        };
        rpc::write_frame(stream, frame).await?;
        Ok(rpc::read_message(stream).await?)
    }
}

/// Hands openraft one [`RaftPeer`] per voter.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    pub(crate) cluster_id: String,
    pub(crate) node_id: NodeId,
    pub(crate) transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> RaftPeer {
        RaftPeer {
            target,
            node: node.clone(),
            conn: PeerConnection::new(
                Arc::clone(&self.transport),
                node.addr.clone(),
                self.cluster_id.clone(),
                self.node_id,
            ),
        }
    }
}

#[derive(Debug)]
pub(crate) struct RaftPeer {
    target: NodeId,
    node: BasicNode,
    conn: PeerConnection,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl RaftPeer {
    fn failure<E: std::error::Error>(
        &self,
        action: RPCTypes,
        error: CallError,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        match error {
            CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&error)),
            CallError::Timeout { timeout, .. } => RPCError::Timeout(Timeout {
                action,
                id: self.conn.from,
                target: self.target,
                timeout,
            }),
            CallError::TooLarge => RPCError::Network(NetworkError::new(&error)),
            CallError::Wire(_) => RPCError::Network(NetworkError::new(&error)),
        }
    }

    #[allow(clippy::result_large_err)] // openraft's error type, fixed by its traits
    fn remote<T, E: std::error::Error>(
        &self,
        result: Result<T, RaftError<NodeId, E>>,
    ) -> RpcResult<T, E> {
        result.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }

    fn unexpected<E: std::error::Error>(
        &self,
        response: RpcResponse,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        let text = match response {
            RpcResponse::Refused(reason) => format!("peer {} refused: {reason}", self.target),
            other => format!("peer {} answered out of turn: {other:?}", self.target),
        };
        let error = std::io::Error::other(text);
        RPCError::Network(NetworkError::new(&error))
    }
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let count = rpc.entries.len() as u64;
        let request = RpcRequest::AppendEntries(rpc);
        match self.conn.call(request, option.hard_ttl()).await {
            Ok(RpcResponse::AppendEntries(result)) => self.remote(result),
            Ok(other) => Err(self.unexpected(other)),
            // Ask openraft to send fewer entries per request.
            Err(CallError::TooLarge) if count > 1 => Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(count / 2),
            )),
            Err(e) => Err(self.failure(RPCTypes::AppendEntries, e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self
            .conn
            .call(RpcRequest::InstallSnapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::InstallSnapshot(result)) => self.remote(result),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.failure(RPCTypes::InstallSnapshot, e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self
            .conn
            .call(RpcRequest::Vote(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::Vote(result)) => self.remote(result),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.failure(RPCTypes::Vote, e)),
        }
    }
}
