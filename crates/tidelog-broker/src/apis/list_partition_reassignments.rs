//! ListPartitionReassignments: the moves in progress, each with its full replica set
//! and the replicas being added and removed. A request naming partitions gets only
//! those that are moving (Kafka skips the others, unknown ones included). A cluster of
//! one never has a move in progress.

use std::collections::BTreeMap;

use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsRequest;
use kafka_protocol::messages::list_partition_reassignments_response::{
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListPartitionReassignmentsRequest = req.decode()?;
    // Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Describe) {
        return req.respond(&ListPartitionReassignmentsResponse::default().with_error_code(code));
    }
    let asked: Option<Vec<(String, i32)>> = request.topics.map(|topics| {
        let mut all: Vec<(String, i32)> = topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.0.as_str().to_owned();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| (name.clone(), p))
            })
            .collect();
        all.sort();
        all.dedup();
        all
    });
    let mut response = ListPartitionReassignmentsResponse::default().with_error_message(None);
    let controller = ctx.metadata.controller();
    if asked.as_ref().is_some_and(Vec::is_empty) {
        return req.respond(&response);
    }
    match controller.list_reassignments(asked).await {
        Ok(moves) => {
            let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
            for m in moves {
                let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
                by_topic.entry(m.topic.clone()).or_default().push(
                    OngoingPartitionReassignment::default()
                        .with_partition_index(m.partition)
                        .with_replicas(ids(&m.replicas))
                        .with_adding_replicas(ids(&m.adding))
                        .with_removing_replicas(ids(&m.removing)),
                );
            }
            response.topics = by_topic
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| p.partition_index);
                    OngoingTopicReassignment::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect();
        }
        Err(e) => {
            response.error_code = e.error_code();
            response.error_message = Some(StrBytes::from_string(e.to_string()));
        }
    }
    req.respond(&response)
}
