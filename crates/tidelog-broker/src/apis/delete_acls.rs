//! DeleteAcls: needs ALTER on the cluster; each filter (Kafka's matching: ANY, MATCH,
//! null fields) removes the ACLs it matches and lists them. A filter with an UNKNOWN
//! field answers INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_request::DeleteAclsRequest;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclEntry, AclOperation};
use tidelog_protocol::ProtocolError;

use super::acl_wire::{filter, gate, text};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

/// v0 left Kafka in 4.0 (KIP-896).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteAclsRequest = req.decode()?;
    let failed = |code: i16, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    if let Err((code, message)) = gate(&req.access(ctx), AclOperation::Alter) {
        let results = request
            .filters
            .iter()
            .map(|_| failed(code, &message))
            .collect();
        return req.respond(&DeleteAclsResponse::default().with_filter_results(results));
    }
    let filters: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let results = match ctx.metadata.delete_acls(filters).await {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(removed) => DeleteAclsFilterResult::default()
                    .with_error_message(None)
                    .with_matching_acls(removed.iter().map(matching).collect()),
                Err(why) => failed(ResponseError::InvalidRequest.code(), &why),
            })
            .collect(),
        Err(e) => request
            .filters
            .iter()
            .map(|_| failed(e.error_code(), &e.to_string()))
            .collect(),
    };
    req.respond(&DeleteAclsResponse::default().with_filter_results(results))
}

fn matching(acl: &AclEntry) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(text(&acl.resource_name))
        .with_pattern_type(acl.pattern_type.code())
        .with_principal(text(&acl.principal))
        .with_host(text(&acl.host))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}
