//! Authorized-operations bitfields (KIP-430): bit `1 << code` for each `AclOperation`
//! code the principal may do (`crate::auth::Access::operations`); without an
//! authorizer that is every operation the resource type supports (Kafka's
//! `AclEntry.supportedOperations`), the constants here.
//! When the client did not ask for them the field keeps Kafka's sentinel.

/// The schema default: "not requested".
pub(crate) const NOT_REQUESTED: i32 = i32::MIN;

// Kafka's `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut field = 0i32;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// A topic: read, write, create, describe, delete, alter, describe/alter configs.
pub(crate) const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DESCRIBE,
    DELETE,
    ALTER,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

/// A group: read, describe, delete, describe/alter configs.
pub(crate) const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);

/// The cluster: create, cluster action, describe/alter configs, idempotent write,
/// alter, describe.
pub(crate) const CLUSTER: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);

/// The principal's operations on the cluster: 0 without DESCRIBE on it, as Kafka
/// answers (Metadata, DescribeCluster).
pub(crate) fn cluster(access: &crate::auth::Access) -> i32 {
    use tidelog_controller::acl::{AclOperation, ResourceType, CLUSTER_NAME};
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
    fn bitfields_match_kafkas_values() {
        // What a Kafka broker without an authorizer answers.
        assert_eq!(TOPIC, 3576);
        assert_eq!(GROUP, 3400);
        assert_eq!(CLUSTER, 8096);
        assert_eq!(if_requested(false, TOPIC), -2_147_483_648);
    }
}
