//! Authorized-operations bitfields (KIP-430): bit `1 << code` for each `AclOperation`
//! code the principal may do on the resource (`crate::auth::Access::operations`);
//! without an authorizer that is every operation the resource type supports (Kafka's
//! `AclEntry.supportedOperations`). When the client did not ask for them the field
//! keeps Kafka's sentinel.

use tidelog_controller::acl::{AclOperation, ResourceType, CLUSTER_NAME};

use crate::auth::Access;

/// The schema default: "not requested".
pub(crate) const NOT_REQUESTED: i32 = i32::MIN;

/// The principal's operations on the cluster: 0 without DESCRIBE on it, as Kafka
/// answers (Metadata, DescribeCluster).
pub(crate) fn cluster(access: &Access) -> i32 {
    if access.cluster(AclOperation::Describe) {
        access.operations(ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    }
}

/// `operations` when the client asked for them, else the sentinel.
pub(crate) fn if_requested(requested: bool, operations: i32) -> i32 {
    if requested {
        operations
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitfields_without_an_authorizer_match_kafkas_values() {
        // What a Kafka broker without an authorizer answers.
        let open = Access::unrestricted();
        assert_eq!(open.operations(ResourceType::Topic, "t"), 3576);
        assert_eq!(open.operations(ResourceType::Group, "g"), 3400);
        assert_eq!(cluster(&open), 8096);
        assert_eq!(if_requested(false, 3576), -2_147_483_648);
    }
}
