//! Access control lists as Kafka's StandardAuthorizer keeps them: each entry allows or
//! denies one operation on one resource pattern to one principal from one host. Entries
//! live in the metadata log (`MetadataRecord::AccessControlEntry`), so every node
//! replays the same set into its image; [`AclIndex`] is the authorizer's view of them.
//!
//! The enums carry Kafka's wire codes (`code` / `from_code`): they are the identity of
//! the values in the ACL APIs, and an unknown code reads as `Unknown`, as in Kafka.

mod authorizer;
mod filter;
#[cfg(test)]
mod tests;

pub use authorizer::{AclIndex, AuthorizerSettings, Decision};
pub use filter::AclFilter;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The ACLs of an image, by id (what replay keeps).
pub type AclMap = BTreeMap<uuid::Uuid, AclEntry>;

/// The name of the one CLUSTER resource (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name matching every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal matching every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host matching every host.
pub const WILDCARD_HOST: &str = "*";

macro_rules! coded_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant),* }

        impl $name {
            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }

            /// The value of a wire code; codes Kafka does not define read as `Unknown`.
            pub fn from_code(code: i8) -> $name {
                match code { $($code => $name::$variant,)* _ => $name::Unknown }
            }
        }
    };
}

coded_enum!(
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0,
        Any = 1,
        Topic = 2,
        Group = 3,
        Cluster = 4,
        TransactionalId = 5,
        DelegationToken = 6,
        User = 7,
    }
);

coded_enum!(
    /// Kafka's `PatternType`: how an ACL's resource name matches (LITERAL, PREFIXED) or,
    /// in a filter only, which ACLs a filter selects (ANY, MATCH).
    PatternType {
        Unknown = 0,
        Any = 1,
        Match = 2,
        Literal = 3,
        Prefixed = 4,
    }
);

coded_enum!(
    /// Kafka's `AclOperation`.
    AclOperation {
        Unknown = 0,
        Any = 1,
        All = 2,
        Read = 3,
        Write = 4,
        Create = 5,
        Delete = 6,
        Alter = 7,
        Describe = 8,
        ClusterAction = 9,
        DescribeConfigs = 10,
        AlterConfigs = 11,
        IdempotentWrite = 12,
        CreateTokens = 13,
        DescribeTokens = 14,
    }
);

coded_enum!(
    /// Kafka's `AclPermissionType`.
    Permission {
        Unknown = 0,
        Any = 1,
        Deny = 2,
        Allow = 3,
    }
);

impl AclOperation {
    /// Every operation an authorized-operations bitfield can hold, in code order.
    pub const CONCRETE: [AclOperation; 12] = [
        AclOperation::Read,
        AclOperation::Write,
        AclOperation::Create,
        AclOperation::Delete,
        AclOperation::Alter,
        AclOperation::Describe,
        AclOperation::ClusterAction,
        AclOperation::DescribeConfigs,
        AclOperation::AlterConfigs,
        AclOperation::IdempotentWrite,
        AclOperation::CreateTokens,
        AclOperation::DescribeTokens,
    ];

    /// Kafka's name of the operation (`READ`, `IDEMPOTENT_WRITE`, ...).
    pub fn name(self) -> &'static str {
        match self {
            AclOperation::Unknown => "UNKNOWN",
            AclOperation::Any => "ANY",
            AclOperation::All => "ALL",
            AclOperation::Read => "READ",
            AclOperation::Write => "WRITE",
            AclOperation::Create => "CREATE",
            AclOperation::Delete => "DELETE",
            AclOperation::Alter => "ALTER",
            AclOperation::Describe => "DESCRIBE",
            AclOperation::ClusterAction => "CLUSTER_ACTION",
            AclOperation::DescribeConfigs => "DESCRIBE_CONFIGS",
            AclOperation::AlterConfigs => "ALTER_CONFIGS",
            AclOperation::IdempotentWrite => "IDEMPOTENT_WRITE",
            AclOperation::CreateTokens => "CREATE_TOKENS",
            AclOperation::DescribeTokens => "DESCRIBE_TOKENS",
        }
    }
}

impl ResourceType {
    /// The operations an ACL on this resource type can grant (Kafka's
    /// `AclEntry.supportedOperations`): what an authorized-operations bitfield covers.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }
}

/// One access control entry: `permission` of `operation` on the resources
/// `resource_type`/`resource_name` matched by `pattern_type`, for `principal`
/// (`Type:name`, or `User:*`) connecting from `host` (an IP address, or `*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclEntry {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: Permission,
}

/// Why an ACL cannot be created (Kafka answers INVALID_REQUEST for each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

impl AclEntry {
    /// Kafka's checks of a new ACL (`AclControlManager.validateNewAcl` and the broker's
    /// checks before it): concrete values only, a non-empty name, the one cluster name,
    /// and a `Type:name` principal.
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        let bad = |why: String| Err(InvalidAcl(why));
        match self.resource_type {
            ResourceType::Unknown | ResourceType::Any => {
                return bad(format!("Invalid resourceType {:?}", self.resource_type))
            }
            _ => {}
        }
        match self.pattern_type {
            PatternType::Literal | PatternType::Prefixed => {}
            other => return bad(format!("Invalid patternType {other:?}")),
        }
        match self.operation {
            AclOperation::Unknown | AclOperation::Any => {
                return bad(format!("Invalid operation {:?}", self.operation))
            }
            _ => {}
        }
        match self.permission {
            Permission::Allow | Permission::Deny => {}
            other => return bad(format!("Invalid permissionType {other:?}")),
        }
        if self.resource_name.is_empty() {
            return bad("Resource name should not be empty".to_owned());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return bad(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if self.principal.is_empty() {
            return bad("Invalid empty principal specified in ACL".to_owned());
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return bad(format!(
                    "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return bad("Invalid empty host specified in ACL".to_owned());
        }
        Ok(())
    }
}
