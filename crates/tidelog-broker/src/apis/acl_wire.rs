//! The ACL APIs' wire fields as `tidelog_controller::acl` values, and back.

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;
use tidelog_controller::acl::{
    AclEntry, AclFilter, AclOperation, PatternType, Permission, ResourceType,
};

/// The first check of the three ACL APIs: SECURITY_DISABLED without an authorizer,
/// CLUSTER_AUTHORIZATION_FAILED unless the caller may `op` the cluster.
pub(crate) fn gate(access: &crate::auth::Access, op: AclOperation) -> Result<(), (i16, String)> {
    if !access.enabled() {
        return Err((
            ResponseError::SecurityDisabled.code(),
            "No Authorizer is configured.".to_owned(),
        ));
    }
    access
        .require_cluster(op)
        .map_err(|code| (code, "Cluster authorization failed.".to_owned()))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn entry(
    resource_type: i8,
    resource_name: &StrBytes,
    pattern_type: i8,
    principal: &StrBytes,
    host: &StrBytes,
    operation: i8,
    permission: i8,
) -> AclEntry {
    AclEntry {
        resource_type: ResourceType::from_code(resource_type),
        resource_name: resource_name.to_string(),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.to_string(),
        host: host.to_string(),
        operation: AclOperation::from_code(operation),
        permission: Permission::from_code(permission),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(resource_type),
        resource_name: resource_name.map(|s| s.to_string()),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.map(|s| s.to_string()),
        host: host.map(|s| s.to_string()),
        operation: AclOperation::from_code(operation),
        permission: Permission::from_code(permission),
    }
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}
