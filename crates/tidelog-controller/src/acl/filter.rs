//! ACL filters of DescribeAcls and DeleteAcls, with Kafka's matching rules
//! (`AclBindingFilter`): `None` strings and ANY enums match everything; pattern type
//! MATCH selects every ACL that would apply to the named resource.

use serde::{Deserialize, Serialize};

use super::{
    AclEntry, AclOperation, InvalidAcl, PatternType, Permission, ResourceType, WILDCARD_RESOURCE,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission: Permission,
}

impl AclFilter {
    /// Every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: Permission::Any,
        }
    }

    /// A filter with an UNKNOWN element matches nothing definite: Kafka refuses it
    /// (`AclBindingFilter.findIndefiniteField`).
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        let unknown = if self.resource_type == ResourceType::Unknown {
            Some("Resource type is UNKNOWN.")
        } else if self.pattern_type == PatternType::Unknown {
            Some("Resource pattern type is UNKNOWN.")
        } else if self.operation == AclOperation::Unknown {
            Some("Operation is UNKNOWN.")
        } else if self.permission == Permission::Unknown {
            Some("Permission type is UNKNOWN.")
        } else {
            None
        };
        match unknown {
            Some(why) => Err(InvalidAcl(why.to_owned())),
            None => Ok(()),
        }
    }

    pub fn matches(&self, acl: &AclEntry) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &AclEntry) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        let any_pattern = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_pattern && self.pattern_type != acl.pattern_type {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        // MATCH: the ACLs that apply to the resource called `name`.
        match acl.pattern_type {
            PatternType::Literal => {
                *name == acl.resource_name || acl.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &AclEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}
