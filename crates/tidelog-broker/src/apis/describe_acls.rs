//! DescribeAcls: needs DESCRIBE on the cluster; answered from this node's image, the
//! ACLs matching the filter grouped by resource pattern (Kafka's matching: ANY, MATCH,
//! null fields). A filter with an UNKNOWN field answers INVALID_REQUEST.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::acl_wire::{filter, gate, text};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

/// v0 left Kafka in 4.0 (KIP-896).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let r: DescribeAclsRequest = req.decode()?;
    let failed = |code: i16, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    if let Err((code, message)) = gate(&req.access(ctx), AclOperation::Describe) {
        return req.respond(&failed(code, &message));
    }
    let wanted = filter(
        r.resource_type_filter,
        r.resource_name_filter.as_ref(),
        r.pattern_type_filter,
        r.principal_filter.as_ref(),
        r.host_filter.as_ref(),
        r.operation,
        r.permission_type,
    );
    if let Err(why) = wanted.validate() {
        return req.respond(&failed(ResponseError::InvalidRequest.code(), &why.0));
    }
    let image = ctx.metadata.image();
    let mut by_resource: BTreeMap<_, Vec<AclDescription>> = BTreeMap::new();
    for acl in image.acls().values().filter(|acl| wanted.matches(acl)) {
        let key = (
            acl.resource_type.code(),
            acl.resource_name.clone(),
            acl.pattern_type.code(),
        );
        by_resource.entry(key).or_default().push(
            AclDescription::default()
                .with_principal(text(&acl.principal))
                .with_host(text(&acl.host))
                .with_operation(acl.operation.code())
                .with_permission_type(acl.permission.code()),
        );
    }
    let resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(text(&name))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    req.respond(
        &DescribeAclsResponse::default()
            .with_error_message(None)
            .with_resources(resources),
    )
}
