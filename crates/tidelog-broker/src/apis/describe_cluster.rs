//! DescribeCluster: the cluster id, the controller, and the brokers: the unfenced ones,
//! and from v2, when asked, the fenced ones too (flagged). When asked, the cluster's
//! authorized operations are every operation the cluster supports (no authorizer).

use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::authorized_operations::{self, if_requested};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeClusterRequest = req.decode()?;
    let image = ctx.metadata.image();
    let access = req.access(ctx);
    let brokers = image
        .brokers()
        .filter(|b| !b.fenced || request.include_fenced_brokers)
        .filter_map(|b| {
            let endpoint = b
                .listeners
                .iter()
                .find(|l| *l.name == *req.session.listener)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.broker_id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string))
                    .with_is_fenced(b.fenced),
            )
        })
        .collect();
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_string(image.cluster_id().to_string()))
        .with_controller_id(BrokerId(ctx.metadata.controller_id(ctx.node_id())))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(if_requested(
            request.include_cluster_authorized_operations,
            authorized_operations::cluster(&access),
        ));
    req.respond(&response)
}
