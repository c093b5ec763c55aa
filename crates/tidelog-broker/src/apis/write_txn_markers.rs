//! WriteTxnMarkers: another node's transaction coordinator asks this node to write
//! COMMIT/ABORT markers to partitions it leads. Each partition answers on its own.

use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::txn::{write_marker, MarkerKey};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: WriteTxnMarkersRequest = req.decode()?;
    let markers = request
        .markers
        .into_iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            let marker = MarkerKey {
                                topic: t.name.0.as_str().to_owned(),
                                partition: *p,
                                producer_id: m.producer_id.0,
                                epoch: m.producer_epoch,
                                commit: m.transaction_result,
                                coordinator_epoch: m.coordinator_epoch,
                            };
                            let code = write_marker(ctx, &marker).err().unwrap_or(0);
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(*p)
                                .with_error_code(code)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    req.respond(&WriteTxnMarkersResponse::default().with_markers(markers))
}
