//! The authorizer's index of the ACLs, with Kafka's StandardAuthorizer rules:
//! super users may do anything; otherwise the ACLs whose pattern matches the resource
//! (its literal name, the literal wildcard `*`, every PREFIXED pattern the name starts
//! with) decide: a matching DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or
//! ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL is everything;
//! when no ACL at all names a matching pattern, `allow.everyone.if.no.acl.found` decides.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::{
    AclEntry, AclOperation, PatternType, Permission, ResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};

/// `super.users` and `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// Principals (`User:name`) that may do anything.
    pub super_users: HashSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// Reads `super.users` as Kafka does: principals separated by semicolons.
    pub fn new(super_users: &str, allow_everyone_if_no_acl_found: bool) -> Self {
        AuthorizerSettings {
            super_users: super_users
                .split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
            allow_everyone_if_no_acl_found,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    Denied,
}

/// ACLs of one resource type, by pattern.
#[derive(Debug, Default)]
struct Section {
    literal: HashMap<String, Vec<AclEntry>>,
    prefixed: HashMap<String, Vec<AclEntry>>,
    all: Vec<AclEntry>,
}

/// The ACLs of one image, arranged for lookups by resource.
#[derive(Debug, Default)]
pub struct AclIndex {
    sections: HashMap<ResourceType, Section>,
    settings: AuthorizerSettings,
}

impl AclIndex {
    pub fn new<'a>(
        acls: impl IntoIterator<Item = (&'a Uuid, &'a AclEntry)>,
        settings: AuthorizerSettings,
    ) -> AclIndex {
        let mut sections: HashMap<ResourceType, Section> = HashMap::new();
        for (_, acl) in acls {
            let section = sections.entry(acl.resource_type).or_default();
            let by_name = match acl.pattern_type {
                PatternType::Literal => &mut section.literal,
                PatternType::Prefixed => &mut section.prefixed,
                // Never created (validated), and so never matched.
                _ => continue,
            };
            by_name
                .entry(acl.resource_name.clone())
                .or_default()
                .push(acl.clone());
            section.all.push(acl.clone());
        }
        AclIndex { sections, settings }
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.settings.super_users.contains(principal)
    }

    /// May `principal` connecting from `host` do `operation` on the resource
    /// `resource_type`/`name`?
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision {
        if self.is_super_user(principal) {
            return Decision::Allowed;
        }
        let mut found_any = false;
        let mut allowed = false;
        for acl in self.candidates(resource_type, name) {
            found_any = true;
            match entry_result(acl, principal, host, operation) {
                Some(Decision::Denied) => return Decision::Denied,
                Some(Decision::Allowed) => allowed = true,
                None => {}
            }
        }
        if allowed || (!found_any && self.settings.allow_everyone_if_no_acl_found) {
            Decision::Allowed
        } else {
            Decision::Denied
        }
    }

    /// Whether `operation` is allowed on at least one resource of the type (Kafka's
    /// `authorizeByResourceType`, used for idempotent producers): some ALLOW that no
    /// DENY covers, the literal wildcard DENY covering all.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Decision {
        // As Kafka: a made-up name, so that super users (and allow.everyone with no ACLs
        // on it) pass whatever DENY ACLs exist.
        if self.authorize(principal, host, operation, resource_type, "hardcode")
            == Decision::Allowed
        {
            return Decision::Allowed;
        }
        let Some(section) = self.sections.get(&resource_type) else {
            return Decision::Denied;
        };
        let mut deny_literal = HashSet::new();
        let mut deny_prefixed = HashSet::new();
        let mut allow = Vec::new();
        for acl in &section.all {
            let applies = host_matches(acl, host)
                && principal_matches(acl, principal)
                && (acl.operation == operation || acl.operation == AclOperation::All);
            if !applies {
                continue;
            }
            match (acl.permission, acl.pattern_type) {
                (Permission::Deny, PatternType::Literal)
                    if acl.resource_name == WILDCARD_RESOURCE =>
                {
                    return Decision::Denied
                }
                (Permission::Deny, PatternType::Literal) => {
                    deny_literal.insert(acl.resource_name.as_str());
                }
                (Permission::Deny, _) => {
                    deny_prefixed.insert(acl.resource_name.as_str());
                }
                (Permission::Allow, PatternType::Literal)
                    if acl.resource_name == WILDCARD_RESOURCE =>
                {
                    return Decision::Allowed
                }
                (Permission::Allow, pattern) => allow.push((pattern, acl.resource_name.as_str())),
                _ => {}
            }
        }
        let undenied = allow.iter().any(|(pattern, name)| {
            let literal_denied = *pattern == PatternType::Literal && deny_literal.contains(name);
            let prefix_denied = prefixes(name).any(|p| deny_prefixed.contains(p));
            !literal_denied && !prefix_denied
        });
        if undenied {
            Decision::Allowed
        } else {
            Decision::Denied
        }
    }

    /// Every ACL whose pattern matches the resource, whoever it is for.
    fn candidates<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclEntry> + 'a {
        let section = self.sections.get(&resource_type);
        let literal = section
            .into_iter()
            .flat_map(move |s| {
                let exact = s.literal.get(name).into_iter();
                let wildcard = (name != WILDCARD_RESOURCE)
                    .then(|| s.literal.get(WILDCARD_RESOURCE))
                    .flatten()
                    .into_iter();
                exact.chain(wildcard)
            })
            .flatten();
        let prefixed = section
            .into_iter()
            .flat_map(move |s| prefixes(name).filter_map(|p| s.prefixed.get(p)))
            .flatten();
        literal.chain(prefixed)
    }
}

/// Every non-empty prefix of `name`, shortest first (at character boundaries).
fn prefixes(name: &str) -> impl Iterator<Item = &str> {
    name.char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .map(move |end| &name[..end])
}

fn principal_matches(acl: &AclEntry, principal: &str) -> bool {
    acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL
}

fn host_matches(acl: &AclEntry, host: &str) -> bool {
    acl.host == WILDCARD_HOST || acl.host == host
}

/// What one ACL whose pattern matches says about the request, if it applies to it
/// (Kafka's `StandardAuthorizerData.findResult`). Implied operations apply to ALLOW
/// ACLs only: a DENY of READ does not deny DESCRIBE.
fn entry_result(
    acl: &AclEntry,
    principal: &str,
    host: &str,
    operation: AclOperation,
) -> Option<Decision> {
    if !principal_matches(acl, principal) || !host_matches(acl, host) {
        return None;
    }
    if acl.operation != AclOperation::All {
        let applies = match (acl.permission, operation) {
            (Permission::Allow, AclOperation::Describe) => matches!(
                acl.operation,
                AclOperation::Describe
                    | AclOperation::Read
                    | AclOperation::Write
                    | AclOperation::Delete
                    | AclOperation::Alter
            ),
            (Permission::Allow, AclOperation::DescribeConfigs) => matches!(
                acl.operation,
                AclOperation::DescribeConfigs | AclOperation::AlterConfigs
            ),
            _ => acl.operation == operation,
        };
        if !applies {
            return None;
        }
    }
    match acl.permission {
        Permission::Allow => Some(Decision::Allowed),
        Permission::Deny => Some(Decision::Denied),
        Permission::Unknown | Permission::Any => None,
    }
}
