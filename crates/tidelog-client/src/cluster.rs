//! Cluster administration: the controller quorum (DescribeQuorum), the brokers with
//! their fenced state (DescribeCluster), leader elections (ElectLeaders) and partition
//! reassignments (AlterPartitionReassignments / ListPartitionReassignments).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, DescribeClusterRequest,
    DescribeQuorumRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::Client;
use crate::error::{ClientError, Result};

/// The name of the metadata log, which DescribeQuorum asks about (Kafka's name).
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Admin requests ask the broker to finish within this long.
const ADMIN_TIMEOUT_MS: i32 = 30_000;

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

/// Which leader [`Client::elect_leaders`] installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica in the list, when it is in the ISR.
    Preferred,
    /// Any live replica of a partition with no live ISR member; may lose acknowledged data.
    Unclean,
}

impl ElectionType {
    fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }
}

/// A partition named by topic and index.
pub type TopicPartition = (String, i32);

/// The outcome for one partition of an admin request that addresses many.
#[derive(Debug)]
pub struct PartitionOutcome {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// `Ok` or the broker's error for this partition.
    pub result: Result<()>,
}

/// A reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Every replica during the move (old and new).
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas that leave once the added ones are in sync.
    pub removing: Vec<i32>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Groups partitions by topic (topics sorted, partitions in the order given).
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<String, Vec<i32>> {
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        out.entry(topic.clone()).or_default().push(*p);
    }
    out
}

fn ids(brokers: Vec<BrokerId>) -> Vec<i32> {
    brokers.into_iter().map(|b| b.0).collect()
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

    /// Cluster id, controller and brokers; fenced brokers too when the broker can say.
    pub async fn describe_cluster(&mut self) -> Result<ClusterDescription> {
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

    async fn elect_leaders_once(
        &mut self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionOutcome>> {
        let conn = self.controller_connection().await?;
        if election == ElectionType::Unclean
            && conn.version(ApiKey::ElectLeaders).is_some_and(|v| v < 1)
        {
            return Err(ClientError::InvalidArgument(
                "this broker only supports preferred leader election (ElectLeaders v0)".into(),
            ));
        }
        let topic_partitions = partitions.map(|ps| {
            by_topic(ps)
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(text(&topic)))
                        .with_partitions(partitions)
                })
                .collect()
        });
        let request = ElectLeadersRequest::default()
            .with_election_type(election.code())
            .with_topic_partitions(topic_partitions)
            .with_timeout_ms(ADMIN_TIMEOUT_MS);
        let response = conn.send(&request).await?;
        ClientError::check(response.error_code, None, || "elect leaders".to_owned())?;
        let mut out = Vec::new();
        for topic in response.replica_election_results {
            let name = topic.topic.0.as_str().to_owned();
            for p in topic.partition_result {
                let result = ClientError::check(
                    p.error_code,
                    p.error_message.as_ref().map(StrBytes::as_str),
                    || format!("elect leader of {name}-{}", p.partition_id),
                );
                out.push(PartitionOutcome {
                    topic: name.clone(),
                    partition: p.partition_id,
                    result,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    async fn alter_partition_reassignments_once(
        &mut self,
        moves: &[(String, i32, Option<Vec<i32>>)],
    ) -> Result<Vec<PartitionOutcome>> {
        let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for (topic, partition, replicas) in moves {
            topics.entry(topic.as_str()).or_default().push(
                ReassignablePartition::default()
                    .with_partition_index(*partition)
                    .with_replicas(
                        replicas
                            .as_ref()
                            .map(|r| r.iter().copied().map(BrokerId).collect()),
                    ),
            );
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        ReassignableTopic::default()
                            .with_name(TopicName(text(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response = self.send_controller(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "alter partition reassignments".to_owned(),
        )?;
        let mut out = Vec::new();
        for topic in response.responses {
            let name = topic.name.0.as_str().to_owned();
            for p in topic.partitions {
                let result = ClientError::check(
                    p.error_code,
                    p.error_message.as_ref().map(StrBytes::as_str),
                    || format!("reassign {name}-{}", p.partition_index),
                );
                out.push(PartitionOutcome {
                    topic: name.clone(),
                    partition: p.partition_index,
                    result,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    async fn list_partition_reassignments_once(
        &mut self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionReassignment>> {
        let topics = partitions.map(|ps| {
            by_topic(ps)
                .into_iter()
                .map(|(topic, indexes)| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(TopicName(text(&topic)))
                        .with_partition_indexes(indexes)
                })
                .collect()
        });
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(topics);
        let response = self.send_controller(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "list partition reassignments".to_owned(),
        )?;
        let mut out = Vec::new();
        for topic in response.topics {
            let name = topic.name.0.as_str().to_owned();
            for p in topic.partitions {
                out.push(PartitionReassignment {
                    topic: name.clone(),
                    partition: p.partition_index,
                    replicas: ids(p.replicas),
                    adding: ids(p.adding_replicas),
                    removing: ids(p.removing_replicas),
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }
}

/// While the controller quorum elects a leader, admin requests answer NOT_CONTROLLER
/// (or time out); they are retried this many times, this far apart (about as long as
/// an election takes).
const CONTROLLER_MOVE_RETRIES: u32 = 20;
const CONTROLLER_MOVE_BACKOFF: Duration = Duration::from_millis(250);

/// Whether `e` means "the controller is moving, ask again".
fn controller_moving(e: &ClientError) -> bool {
    matches!(e.response_error(), Some(ResponseError::NotController))
}

/// Runs `$call` (an expression on `$client`) again while the controller moves.
macro_rules! retrying_controller_moves {
    ($client:ident, $call:expr) => {{
        let mut attempt = 0;
        loop {
            match $call {
                Err(e) if controller_moving(&e) && attempt < CONTROLLER_MOVE_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(CONTROLLER_MOVE_BACKOFF).await;
                    // The controller id in metadata moves with the quorum leader.
                    let _ = $client.refresh_metadata(Some(&[]), false).await;
                }
                other => break other,
            }
        }
    }};
}

impl Client {
    /// Leader, epoch and voters (with log end offsets) of the controller quorum.
    pub async fn describe_quorum(&mut self) -> Result<QuorumInfo> {
        retrying_controller_moves!(self, self.describe_quorum_once().await)
    }

    /// Elects leaders of `partitions` (`None`: every partition whose leader is not the
    /// one asked for). Returns one outcome per partition the controller acted on.
    pub async fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionOutcome>> {
        retrying_controller_moves!(self, self.elect_leaders_once(election, partitions).await)
    }

    /// Starts (target replicas) or cancels (`None`) reassignments of partitions. Safe
    /// to repeat: the same target again changes nothing.
    pub async fn alter_partition_reassignments(
        &mut self,
        moves: &[(String, i32, Option<Vec<i32>>)],
    ) -> Result<Vec<PartitionOutcome>> {
        retrying_controller_moves!(self, self.alter_partition_reassignments_once(moves).await)
    }

    /// Reassignments in progress (`None`: all of them), sorted by topic and partition.
    pub async fn list_partition_reassignments(
        &mut self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionReassignment>> {
        retrying_controller_moves!(
            self,
            self.list_partition_reassignments_once(partitions).await
        )
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

    #[test]
    fn partitions_are_grouped_by_topic() {
        let grouped = by_topic(&[("b".into(), 1), ("a".into(), 0), ("b".into(), 0)]);
        assert_eq!(
            grouped.into_iter().collect::<Vec<_>>(),
            vec![("a".into(), vec![0]), ("b".into(), vec![1, 0])]
        );
    }
}
