//! WriteTxnMarkers: another node's transaction coordinator asks this node to write
//! COMMIT/ABORT markers to partitions it leads. Each partition answers on its own, once
//! its marker is replicated; a `__consumer_offsets` partition gets its marker through
//! the group coordinator, which commits or drops the offsets the transaction sent there.
//!
//! v2 (KIP-1228) names each marker's transaction version, with which Kafka's leaders
//! check a TV2 marker's epoch strictly (above the producer's) instead of at least equal.
//! tidelog reads the field but checks every marker the TV1 way for now; its own
//! coordinators send v1.

use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::txn::{write_local_marker, MarkerKey};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: WriteTxnMarkersRequest = req.decode()?;
    let mut markers = Vec::with_capacity(request.markers.len());
    // CLUSTER_ACTION: only brokers write markers.
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::ClusterAction)
        .err();
    for m in request.markers {
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in &m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for p in &t.partition_indexes {
                let marker = MarkerKey {
                    topic: t.name.0.as_str().to_owned(),
                    partition: *p,
                    producer_id: m.producer_id.0,
                    epoch: m.producer_epoch,
                    commit: m.transaction_result,
                    coordinator_epoch: m.coordinator_epoch,
                };
                let code = match refused {
                    Some(code) => code,
                    None => write_local_marker(&ctx.replicas, &ctx.groups, &marker)
                        .await
                        .map_or_else(|e| e.code(), |()| 0),
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(*p)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    req.respond(&WriteTxnMarkersResponse::default().with_markers(markers))
}
