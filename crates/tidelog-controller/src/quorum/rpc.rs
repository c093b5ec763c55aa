//! The wire format between controllers.
//!
//! A connection carries request/response pairs, one at a time. Each message is a frame:
//! ```text
//! 0  u32  len    1 ..= MAX_RPC_BYTES, checked before anything is allocated
//! 4  ..   body   JSON: RpcEnvelope (client to server) or RpcResponse (back)
//! ```
//! JSON because every openraft message already derives serde, the volume is small
//! (metadata, not messages) and frames stay readable in a packet capture. Every
//! request names the cluster id, so a controller of another cluster pointed at the
//! wrong port is refused rather than given votes.

use std::time::Duration;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::forward::{ForwardReply, ForwardedCall};
use super::types::{NodeId, TypeConfig};

/// Upper bound of one frame. openraft splits append-entries batches that exceed it
/// (see `network`); snapshot chunks are far smaller.
pub(crate) const MAX_RPC_BYTES: usize = 96 * 1024 * 1024;
/// How long an idle inbound connection is kept; peers send heartbeats far more often.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RpcEnvelope {
    pub(crate) cluster_id: String,
    pub(crate) from: NodeId,
    pub(crate) request: RpcRequest,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A controller request sent on by a voter that is not the leader: run it here,
    /// never forward it again.
    Forward(ForwardedCall),
    /// A controller request from a node that is not a voter (a broker-only node): the
    /// receiving voter may forward it once, to its leader.
    ClientCall(ForwardedCall),
    /// From a leader about to stop (Raft's TimeoutNow): its log is fully replicated
    /// here, start an election now rather than after the election timeout. Honoured
    /// only from the leader of `term` as the receiver knows it.
    ElectNow {
        term: u64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Forward(ForwardReply),
    /// Whether the receiver started the election `ElectNow` asked for.
    ElectNow(bool),
    /// The server would not handle the request (wrong cluster, shutting down).
    Refused(String),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    #[error("connection I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes is outside 1..={MAX_RPC_BYTES}")]
    BadLength(usize),
    #[error("undecodable frame: {0}")]
    Decode(String),
    #[error("connection closed")]
    Closed,
}

pub(crate) fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, WireError> {
    let body = serde_json::to_vec(message).map_err(|e| WireError::Decode(e.to_string()))?;
    if body.is_empty() || body.len() > MAX_RPC_BYTES {
        return Err(WireError::BadLength(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

pub(crate) async fn write_frame(
    out: &mut (impl AsyncWrite + Unpin),
    frame: &[u8],
) -> Result<(), WireError> {
    out.write_all(frame).await?;
    out.flush().await?;
    Ok(())
}

/// Reads one frame; `Closed` on a clean end of stream before the first byte.
pub(crate) async fn read_message<T: serde::de::DeserializeOwned>(
    input: &mut (impl AsyncRead + Unpin),
) -> Result<T, WireError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_RPC_BYTES {
        return Err(WireError::BadLength(len));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(|e| WireError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_lengths_are_refused() {
        let message = RpcResponse::Refused("wrong cluster".into());
        let frame = encode(&message).unwrap();
        let mut input = &frame[..];
        match read_message::<RpcResponse>(&mut input).await.unwrap() {
            RpcResponse::Refused(text) => assert_eq!(text, "wrong cluster"),
            other => panic!("{other:?}"),
        }
        let mut huge = &[0xffu8, 0xff, 0xff, 0xff, b'{'][..];
        assert!(matches!(
            read_message::<RpcResponse>(&mut huge).await,
            Err(WireError::BadLength(_))
        ));
        let mut empty = &[][..];
        assert!(matches!(
            read_message::<RpcResponse>(&mut empty).await,
            Err(WireError::Closed)
        ));
        let mut cut = &frame[..frame.len() - 1];
        assert!(matches!(
            read_message::<RpcResponse>(&mut cut).await,
            Err(WireError::Io(_))
        ));
    }
}
