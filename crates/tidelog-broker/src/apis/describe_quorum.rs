//! DescribeQuorum: the controller quorum's leader, epoch and voters, each with the end
//! of its copy of the metadata log (the leader's view, so lag = leader's end − voter's).
//!
//! The only partition it describes is Kafka's `__cluster_metadata`-0; anything else is
//! answered UNKNOWN_TOPIC_OR_PARTITION. On a cluster of one (no `--quorum`) this node
//! is the only voter and the leader, and its log end is the local metadata log's.

use kafka_protocol::messages::describe_quorum_request::DescribeQuorumRequest;
use kafka_protocol::messages::describe_quorum_response::{
    DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quorum::QuorumStatus;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::{now_ms, Ctx};
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's name for the metadata log; clients (kafka-metadata-quorum, AdminClient) ask
/// for partition 0 of it.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name voters are reported under (v2 `nodes`).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeQuorumRequest = req.decode()?;
    // Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Describe) {
        return req.respond(&DescribeQuorumResponse::default().with_error_code(code));
    }
    let version = req.version();
    let asks_for_metadata_log = request.topics.len() == 1
        && request.topics.iter().all(|t| {
            t.topic_name.0.as_str() == METADATA_TOPIC
                && t.partitions.len() == 1
                && t.partitions.iter().all(|p| p.partition_index == 0)
        });
    if !asks_for_metadata_log {
        return req.respond(&unknown_partitions(request, version));
    }
    let quorum = ctx
        .metadata
        .controller()
        .describe_quorum()
        .await
        .map(|s| from_status(&s));
    let response = match quorum {
        Ok(quorum) => quorum.into_response(version),
        Err(e) => {
            let mut response = DescribeQuorumResponse::default().with_error_code(e.error_code());
            if version >= 2 {
                response.error_message = Some(StrBytes::from_string(e.to_string()));
            }
            response
        }
    };
    req.respond(&response)
}

/// One voter as this handler reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Voter {
    node_id: i32,
    /// -1 when the leader does not know it.
    log_end: i64,
    /// `host:port` of its controller listener, when known.
    address: Option<(String, u16)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct QuorumView {
    leader: i32,
    epoch: i32,
    high_watermark: i64,
    voters: Vec<Voter>,
}

/// The leader's status as Kafka's fields: the Raft term is the epoch, the applied end
/// (what the leader's image holds, all committed) the high watermark.
fn from_status(status: &QuorumStatus) -> QuorumView {
    let offset = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    QuorumView {
        leader: status.leader.unwrap_or(-1),
        epoch: i32::try_from(status.term).unwrap_or(i32::MAX),
        high_watermark: offset(status.applied_end),
        voters: status
            .voters
            .iter()
            .map(|v| Voter {
                node_id: v.node_id,
                log_end: v.log_end.map_or(-1, offset),
                address: split_address(&v.address),
            })
            .collect(),
    }
}

fn split_address(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), port.parse().ok()?))
}

impl QuorumView {
    fn into_response(self, version: i16) -> DescribeQuorumResponse {
        let now = now_ms();
        let replicas = self
            .voters
            .iter()
            .map(|v| {
                let mut state = ReplicaState::default()
                    .with_replica_id(BrokerId(v.node_id))
                    .with_log_end_offset(v.log_end);
                if version >= 1 {
                    // The leader is always caught up with itself; for the others we
                    // keep no fetch times, which Kafka reports as -1.
                    let seen = if v.node_id == self.leader { now } else { -1 };
                    state.last_fetch_timestamp = seen;
                    state.last_caught_up_timestamp = seen;
                }
                state
            })
            .collect();
        let mut partition = PartitionData::default()
            .with_partition_index(0)
            .with_leader_id(BrokerId(self.leader))
            .with_leader_epoch(self.epoch)
            .with_high_watermark(self.high_watermark)
            .with_current_voters(replicas);
        if version < 2 {
            partition.error_message = None;
        }
        let mut response =
            DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
                .with_topic_name(kafka_protocol::messages::TopicName(
                    StrBytes::from_static_str(METADATA_TOPIC),
                ))
                .with_partitions(vec![partition])]);
        if version >= 2 {
            response.nodes = self
                .voters
                .iter()
                .filter_map(|v| {
                    let (host, port) = v.address.clone()?;
                    Some(
                        Node::default()
                            .with_node_id(BrokerId(v.node_id))
                            .with_listeners(vec![Listener::default()
                                .with_name(StrBytes::from_static_str(CONTROLLER_LISTENER))
                                .with_host(StrBytes::from_string(host))
                                .with_port(port)]),
                    )
                })
                .collect();
        } else {
            response.error_message = None;
        }
        response
    }
}

/// Every asked-for partition answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka does for
/// anything but the metadata log.
fn unknown_partitions(request: DescribeQuorumRequest, version: i16) -> DescribeQuorumResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut data = PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_leader_id(BrokerId(-1))
                        .with_leader_epoch(-1)
                        .with_high_watermark(-1);
                    if version < 2 {
                        data.error_message = None;
                    }
                    data
                })
                .collect();
            TopicData::default()
                .with_topic_name(t.topic_name)
                .with_partitions(partitions)
        })
        .collect();
    let mut response = DescribeQuorumResponse::default().with_topics(topics);
    if version < 2 {
        response.error_message = None;
    }
    response
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::{Decodable, Encodable};
    use tidelog_controller::quorum::{QuorumRole, VoterStatus};

    use super::*;

    fn status() -> QuorumStatus {
        QuorumStatus {
            node_id: 2,
            role: QuorumRole::Leader,
            term: 7,
            leader: Some(2),
            log_end: 120,
            applied_end: 118,
            snapshot_end: 0,
            snapshots_installed: 0,
            voters: vec![
                VoterStatus {
                    node_id: 1,
                    address: "127.0.0.1:19093".into(),
                    log_end: Some(100),
                    lag: Some(20),
                },
                VoterStatus {
                    node_id: 2,
                    address: "127.0.0.1:29093".into(),
                    log_end: Some(120),
                    lag: Some(0),
                },
                VoterStatus {
                    node_id: 3,
                    address: "[::1]:39093".into(),
                    log_end: None,
                    lag: None,
                },
            ],
        }
    }

    #[test]
    fn the_leaders_status_maps_to_kafka_fields() {
        let view = from_status(&status());
        assert_eq!((view.leader, view.epoch, view.high_watermark), (2, 7, 118));
        let ends: Vec<(i32, i64)> = view.voters.iter().map(|v| (v.node_id, v.log_end)).collect();
        assert_eq!(ends, vec![(1, 100), (2, 120), (3, -1)]);
        assert_eq!(view.voters[2].address, Some(("::1".into(), 39093)));
    }

    #[test]
    fn every_version_encodes_and_decodes_back() {
        for version in VERSIONS.min..=VERSIONS.max {
            let response = from_status(&status()).into_response(version);
            let mut buf = bytes::BytesMut::new();
            response.encode(&mut buf, version).unwrap();
            let back = DescribeQuorumResponse::decode(&mut buf.freeze(), version).unwrap();
            let p = &back.topics[0].partitions[0];
            assert_eq!(
                (p.leader_id.0, p.leader_epoch, p.high_watermark),
                (2, 7, 118)
            );
            assert_eq!(p.current_voters.len(), 3);
            assert_eq!(p.current_voters[0].log_end_offset, 100);
            assert_eq!(back.nodes.len(), if version >= 2 { 3 } else { 0 });
        }
    }

    #[test]
    fn other_partitions_are_unknown() {
        let request = DescribeQuorumRequest::default().with_topics(vec![
            kafka_protocol::messages::describe_quorum_request::TopicData::default()
                .with_topic_name(kafka_protocol::messages::TopicName(
                    StrBytes::from_static_str("orders"),
                ))
                .with_partitions(vec![
                    kafka_protocol::messages::describe_quorum_request::PartitionData::default(),
                ]),
        ]);
        for version in VERSIONS.min..=VERSIONS.max {
            let response = unknown_partitions(request.clone(), version);
            let mut buf = bytes::BytesMut::new();
            response.encode(&mut buf, version).unwrap();
            assert_eq!(response.topics[0].partitions[0].error_code, 3);
        }
    }
}
