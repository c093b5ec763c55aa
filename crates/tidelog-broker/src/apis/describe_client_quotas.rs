//! DescribeClientQuotas: tidelog stores no client quotas yet (AlterClientQuotas refuses
//! them), so a valid filter matches nothing and the answer is an empty list, as a Kafka
//! cluster with no quotas set answers; an invalid filter is refused as Kafka refuses it
//! (see `client_quota_filter`), with the message and a null entry list.

use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::DescribeClientQuotasResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::client_quota_filter;
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeClientQuotasRequest = req.decode()?;
    // DescribeConfigs on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req
        .access(ctx)
        .require_cluster(AclOperation::DescribeConfigs)
    {
        return req.respond(
            &DescribeClientQuotasResponse::default()
                .with_entries(None)
                .with_error_code(code),
        );
    }
    let response = match client_quota_filter::check(&request.components) {
        Ok(()) => DescribeClientQuotasResponse::default()
            .with_error_message(None)
            .with_entries(Some(Vec::new())),
        Err((code, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None),
    };
    req.respond(&response)
}
