//! Cluster administration: the controller quorum (DescribeQuorum) and the brokers with
//! their fenced state (DescribeCluster); the retry every controller request shares while
//! the quorum elects a leader (used by `partition_admin` too).

use crate::client::Client;
use crate::error::{ClientError, Result};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeQuorumRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// The name of the metadata log, which DescribeQuorum asks about (Kafka's name).
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Admin requests ask the broker to finish within this long.
pub(crate) const ADMIN_TIMEOUT_MS: i32 = 30_000;

/// One member of the controller quorum as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplica {
    /// Node id.
    pub node_id: i32,
    /// End of its copy of the metadata log; -1 when the leader does not know it.
    pub log_end_offset: i64,
    /// Milliseconds since the epoch of its last fetch, -1 when unknown.
    pub last_fetch_timestamp: i64,
    /// Milliseconds since the epoch when it was last caught up, -1 when unknown.
    pub last_caught_up_timestamp: i64,
}

/// The controller quorum: who leads, in which epoch, and how far behind each voter is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    /// Node id of the active controller, -1 when there is none.
    pub leader_id: i32,
    /// The leader's epoch (Raft term).
    pub leader_epoch: i32,
    /// Committed end of the metadata log.
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<QuorumReplica>,
    /// Nodes that follow the log without voting.
    pub observers: Vec<QuorumReplica>,
}

impl QuorumInfo {
    /// Entries a voter is behind the leader; `None` when either log end is unknown.
    pub fn lag_of(&self, replica: &QuorumReplica) -> Option<i64> {
        let leader = self.voters.iter().find(|v| v.node_id == self.leader_id)?;
        if leader.log_end_offset < 0 || replica.log_end_offset < 0 {
            return None;
        }
        Some((leader.log_end_offset - replica.log_end_offset).max(0))
    }
}

/// One registered broker as DescribeCluster reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterBroker {
    /// Node id.
    pub node_id: i32,
    /// `host:port` of its client listener.
    pub address: String,
    /// Rack, when configured.
    pub rack: Option<String>,
    /// True when its session expired (or it has not heartbeated yet). Only known when
    /// the broker speaks DescribeCluster v2; older ones list unfenced brokers only.
    pub fenced: bool,
}

/// The cluster as DescribeCluster reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// Cluster id.
    pub cluster_id: String,
    /// The node answering admin requests.
    pub controller_id: i32,
    /// Brokers sorted by node id.
    pub brokers: Vec<ClusterBroker>,
    /// Whether `brokers` includes fenced ones (DescribeCluster v2 and later).
    pub includes_fenced: bool,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Client {
    async fn describe_quorum_once(&mut self) -> Result<QuorumInfo> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(text(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let response = self.send_any(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "describe quorum".to_owned(),
        )?;
        let partition = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or_else(|| ClientError::Protocol("describe quorum response is empty".into()))?;
        ClientError::check(
            partition.error_code,
            partition.error_message.as_ref().map(StrBytes::as_str),
            || "describe quorum".to_owned(),
        )?;
        let replica =
            |r: kafka_protocol::messages::describe_quorum_response::ReplicaState| QuorumReplica {
                node_id: r.replica_id.0,
                log_end_offset: r.log_end_offset,
                last_fetch_timestamp: r.last_fetch_timestamp,
                last_caught_up_timestamp: r.last_caught_up_timestamp,
            };
        Ok(QuorumInfo {
            leader_id: partition.leader_id.0,
            leader_epoch: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: partition.current_voters.into_iter().map(replica).collect(),
            observers: partition.observers.into_iter().map(replica).collect(),
        })
    }

    async fn describe_cluster_once(&mut self) -> Result<ClusterDescription> {
        let conn = self.any_connection().await?;
        let includes_fenced = conn
            .version(ApiKey::DescribeCluster)
            .is_some_and(|v| v >= 2);
        let request =
            DescribeClusterRequest::default().with_include_fenced_brokers(includes_fenced);
        let response = conn.send(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "describe cluster".to_owned(),
        )?;
        let mut brokers: Vec<ClusterBroker> = response
            .brokers
            .into_iter()
            .map(|b| {
                let host = b.host.as_str();
                let address = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]:{}", b.port)
                } else {
                    format!("{host}:{}", b.port)
                };
                ClusterBroker {
                    node_id: b.broker_id.0,
                    address,
                    rack: b.rack.map(|r| r.as_str().to_owned()),
                    fenced: b.is_fenced,
                }
            })
            .collect();
        brokers.sort_by_key(|b| b.node_id);
        Ok(ClusterDescription {
            cluster_id: response.cluster_id.as_str().to_owned(),
            controller_id: response.controller_id.0,
            brokers,
            includes_fenced,
        })
    }
}

/// Runs `$call` (an expression on `$client`) again while it fails with a retriable
/// error (the controller moving or being elected, a leader election, a refused
/// connection, a timeout), with backoff and a fresh broker list between attempts,
/// until the client's API timeout runs out (Kafka's AdminClient does the same).
macro_rules! retrying {
    ($client:ident, $call:expr) => {{
        let started = tokio::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            match $call {
                Err(e) if e.is_retriable() => {
                    if let Err(gave_up) = $client.before_retry(e, attempt, started, true).await {
                        break Err(gave_up);
                    }
                    attempt += 1;
                }
                other => break other,
            }
        }
    }};
}

pub(crate) use retrying;

impl Client {
    /// Leader, epoch and voters (with log end offsets) of the controller quorum.
    pub async fn describe_quorum(&mut self) -> Result<QuorumInfo> {
        retrying!(self, self.describe_quorum_once().await)
    }

    /// Cluster id, controller and brokers; fenced brokers too when the broker can say.
    pub async fn describe_cluster(&mut self) -> Result<ClusterDescription> {
        retrying!(self, self.describe_cluster_once().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(node_id: i32, log_end_offset: i64) -> QuorumReplica {
        QuorumReplica {
            node_id,
            log_end_offset,
            last_fetch_timestamp: -1,
            last_caught_up_timestamp: -1,
        }
    }

    #[test]
    fn lag_is_measured_against_the_leader() {
        let info = QuorumInfo {
            leader_id: 2,
            leader_epoch: 4,
            high_watermark: 100,
            voters: vec![replica(1, 90), replica(2, 120), replica(3, -1)],
            observers: vec![],
        };
        assert_eq!(info.lag_of(&info.voters[0]), Some(30));
        assert_eq!(info.lag_of(&info.voters[1]), Some(0));
        assert_eq!(info.lag_of(&info.voters[2]), None);
        let leaderless = QuorumInfo {
            leader_id: -1,
            ..info.clone()
        };
        assert_eq!(leaderless.lag_of(&info.voters[0]), None);
    }
}
