//! ElectLeaders: preferred (the first replica takes leadership back) or unclean (an
//! offline partition takes any live replica, which may lose acknowledged records).
//!
//! The controller does the electing. Partitions this node's image does not know are
//! answered UNKNOWN_TOPIC_OR_PARTITION without asking it. When the request names no
//! partitions (all of them), partitions that need no election are left out of the
//! answer, as Kafka does. On a cluster of one there is no other replica to elect:
//! every partition answers ELECTION_NOT_NEEDED (or, when offline, that no eligible
//! leader exists).

use std::collections::BTreeMap;

use kafka_protocol::messages::elect_leaders_request::ElectLeadersRequest;
use kafka_protocol::messages::elect_leaders_response::{
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quorum::ElectionKind;
use tidelog_controller::MetadataImage;
use tidelog_protocol::ProtocolError;

use super::partition_outcome::{record_controller_reply, Outcome};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ElectLeadersRequest = req.decode()?;
    // Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Alter) {
        return req.respond(&ElectLeadersResponse::default().with_error_code(code));
    }
    let version = req.version();
    let kind = match request.election_type {
        0 => ElectionKind::Preferred,
        1 => ElectionKind::Unclean,
        other => {
            // Only v1+ carries the field, and v1+ has the top-level error code.
            tracing::debug!(election_type = other, "unknown election type");
            let response = ElectLeadersResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code());
            return req.respond(&response);
        }
    };
    let image = ctx.metadata.image();
    let requested: Option<Vec<(String, i32)>> = request.topic_partitions.map(|topics| {
        let mut all: Vec<(String, i32)> = topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.0.as_str().to_owned();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect();
        all.sort();
        all.dedup();
        all
    });
    let mut outcomes: BTreeMap<(String, i32), Outcome> = BTreeMap::new();
    let mut top_level = 0;
    let known = requested.as_ref().map(|all| {
        let (known, unknown): (Vec<_>, Vec<_>) = all
            .iter()
            .cloned()
            .partition(|(t, p)| exists(&image, t, *p));
        for tp in unknown {
            let message = format!("{}-{} does not exist", tp.0, tp.1);
            outcomes.insert(
                tp,
                Some((ResponseError::UnknownTopicOrPartition.code(), message)),
            );
        }
        known
    });
    let asked = known.as_ref().is_some_and(|k| !k.is_empty()) || requested.is_none();
    if asked {
        let reply = ctx
            .metadata
            .controller()
            .elect_leaders(kind, known.clone())
            .await;
        let failed = record_controller_reply(&mut outcomes, reply, known.into_iter().flatten());
        top_level = failed.map_or(0, |(code, _)| code);
    }
    if requested.is_none() {
        let not_needed = ResponseError::ElectionNotNeeded.code();
        outcomes.retain(|_, o| o.as_ref().is_none_or(|(code, _)| *code != not_needed));
    }
    let mut response =
        ElectLeadersResponse::default().with_replica_election_results(to_results(outcomes));
    if version >= 1 {
        response.error_code = top_level;
    }
    req.respond(&response)
}

fn exists(image: &MetadataImage, topic: &str, partition: i32) -> bool {
    image
        .topic(topic)
        .is_some_and(|t| t.partitions.contains_key(&partition))
}

fn to_results(outcomes: BTreeMap<(String, i32), Outcome>) -> Vec<ReplicaElectionResult> {
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, partition), outcome) in outcomes {
        let result = match outcome {
            None => PartitionResult::default()
                .with_partition_id(partition)
                .with_error_code(0)
                .with_error_message(None),
            Some((code, message)) => PartitionResult::default()
                .with_partition_id(partition)
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        };
        by_topic.entry(topic).or_default().push(result);
    }
    by_topic
        .into_iter()
        .map(|(topic, results)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic)))
                .with_partition_result(results)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::{Decodable, Encodable};

    #[test]
    fn results_group_by_topic_and_encode_at_every_version() {
        let mut outcomes = BTreeMap::new();
        outcomes.insert(("b".to_owned(), 1), None);
        outcomes.insert(("a".to_owned(), 0), Some((3, "missing".to_owned())));
        outcomes.insert(("b".to_owned(), 0), Some((84, "not needed".to_owned())));
        let results = to_results(outcomes);
        for version in VERSIONS.min..=VERSIONS.max {
            let response =
                ElectLeadersResponse::default().with_replica_election_results(results.clone());
            let mut buf = bytes::BytesMut::new();
            response.encode(&mut buf, version).unwrap();
            let back = ElectLeadersResponse::decode(&mut buf.freeze(), version).unwrap();
            let flat: Vec<(String, i32, i16)> = back
                .replica_election_results
                .iter()
                .flat_map(|t| {
                    t.partition_result
                        .iter()
                        .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
                })
                .collect();
            assert_eq!(
                flat,
                vec![("a".into(), 0, 3), ("b".into(), 0, 84), ("b".into(), 1, 0)]
            );
        }
    }
}
