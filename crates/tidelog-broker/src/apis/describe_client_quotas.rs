//! DescribeClientQuotas: needs DESCRIBE_CONFIGS on the cluster; answered from this
//! node's metadata image as Kafka's `ClientQuotasImage.describe` answers (see
//! `tidelog_controller::quota::describe_client_quotas`). An invalid filter is refused
//! as Kafka refuses it (see `client_quota_filter`), with the message and a null entry
//! list.

use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::{
    DescribeClientQuotasResponse, EntityData, EntryData, ValueData,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quota::describe_client_quotas;
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
        Ok(components) => {
            let image = ctx.metadata.image();
            let entries = describe_client_quotas(&image, &components, request.strict)
                .into_iter()
                .map(|(entity, values)| {
                    EntryData::default()
                        .with_entity(
                            entity
                                .0
                                .iter()
                                .map(|(kind, name)| {
                                    EntityData::default()
                                        .with_entity_type(StrBytes::from_string(kind.clone()))
                                        .with_entity_name(name.clone().map(StrBytes::from_string))
                                })
                                .collect(),
                        )
                        .with_values(
                            values
                                .iter()
                                .map(|(key, value)| {
                                    ValueData::default()
                                        .with_key(StrBytes::from_string(key.clone()))
                                        .with_value(value.0)
                                })
                                .collect(),
                        )
                })
                .collect();
            DescribeClientQuotasResponse::default()
                .with_error_message(None)
                .with_entries(Some(entries))
        }
        Err((code, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None),
    };
    req.respond(&response)
}
