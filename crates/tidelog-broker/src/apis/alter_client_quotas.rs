//! AlterClientQuotas: refused for every entity, validate_only or not, with
//! UNSUPPORTED_VERSION and a message saying why. tidelog neither stores nor enforces
//! client quotas yet (they belong with the security work: quotas as metadata records,
//! enforced by throttling); accepting them would promise a limit nothing applies.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntityData, EntryData,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) const REFUSAL: &str =
    "client quotas are not supported by tidelog yet: they would be neither stored nor enforced";

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterClientQuotasRequest = req.decode()?;
    // ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED per entry.
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::AlterConfigs)
        .err();
    let entries = request
        .entries
        .into_iter()
        .map(|entry| {
            let entity = entry
                .entity
                .into_iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type)
                        .with_entity_name(e.entity_name)
                })
                .collect();
            EntryData::default()
                .with_error_code(refused.unwrap_or(ResponseError::UnsupportedVersion.code()))
                .with_error_message(Some(StrBytes::from_static_str(match refused {
                    Some(_) => "Cluster authorization failed.",
                    None => REFUSAL,
                })))
                .with_entity(entity)
        })
        .collect();
    req.respond(&AlterClientQuotasResponse::default().with_entries(entries))
}
