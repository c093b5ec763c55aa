//! ACL administration: CreateAcls, DescribeAcls, DeleteAcls (sent to any broker; the
//! broker forwards writes to the controller). Values are Kafka's wire codes, with
//! their names for people ([`AclCode`]).

use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::DescribeAclsRequest;
use kafka_protocol::protocol::StrBytes;

use crate::cluster::retrying;
use crate::error::{ClientError, Result};
use crate::Client;

/// A Kafka ACL enum (resource type, pattern type, operation, permission): its names
/// and wire codes, as kafka-acls spells them (case and `-`/`_` ignored when parsing).
#[derive(Debug, Clone, Copy)]
pub struct AclCode;

const RESOURCE_TYPES: &[(&str, i8)] = &[
    ("ANY", 1),
    ("TOPIC", 2),
    ("GROUP", 3),
    ("CLUSTER", 4),
    ("TRANSACTIONAL_ID", 5),
    ("DELEGATION_TOKEN", 6),
    ("USER", 7),
];
const PATTERN_TYPES: &[(&str, i8)] = &[("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)];
const OPERATIONS: &[(&str, i8)] = &[
    ("ANY", 1),
    ("ALL", 2),
    ("READ", 3),
    ("WRITE", 4),
    ("CREATE", 5),
    ("DELETE", 6),
    ("ALTER", 7),
    ("DESCRIBE", 8),
    ("CLUSTER_ACTION", 9),
    ("DESCRIBE_CONFIGS", 10),
    ("ALTER_CONFIGS", 11),
    ("IDEMPOTENT_WRITE", 12),
    ("CREATE_TOKENS", 13),
    ("DESCRIBE_TOKENS", 14),
];
const PERMISSIONS: &[(&str, i8)] = &[("ANY", 1), ("DENY", 2), ("ALLOW", 3)];

fn code_of(table: &[(&str, i8)], name: &str) -> Option<i8> {
    let wanted = name.trim().to_ascii_uppercase().replace('-', "_");
    let wanted = match wanted.as_str() {
        "CLUSTERACTION" => "CLUSTER_ACTION".to_owned(),
        "DESCRIBECONFIGS" => "DESCRIBE_CONFIGS".to_owned(),
        "ALTERCONFIGS" => "ALTER_CONFIGS".to_owned(),
        "IDEMPOTENTWRITE" => "IDEMPOTENT_WRITE".to_owned(),
        "TRANSACTIONALID" => "TRANSACTIONAL_ID".to_owned(),
        _ => wanted,
    };
    table.iter().find(|(n, _)| *n == wanted).map(|(_, c)| *c)
}

fn name_of(table: &[(&'static str, i8)], code: i8) -> &'static str {
    table
        .iter()
        .find(|(_, c)| *c == code)
        .map_or("UNKNOWN", |(n, _)| n)
}

impl AclCode {
    pub fn resource_type(name: &str) -> Option<i8> {
        code_of(RESOURCE_TYPES, name)
    }
    pub fn pattern_type(name: &str) -> Option<i8> {
        code_of(PATTERN_TYPES, name)
    }
    pub fn operation(name: &str) -> Option<i8> {
        code_of(OPERATIONS, name)
    }
    pub fn permission(name: &str) -> Option<i8> {
        code_of(PERMISSIONS, name)
    }
    pub fn resource_type_name(code: i8) -> &'static str {
        name_of(RESOURCE_TYPES, code)
    }
    pub fn pattern_type_name(code: i8) -> &'static str {
        name_of(PATTERN_TYPES, code)
    }
    pub fn operation_name(code: i8) -> &'static str {
        name_of(OPERATIONS, code)
    }
    pub fn permission_name(code: i8) -> &'static str {
        name_of(PERMISSIONS, code)
    }
}

/// One ACL (Kafka's `AclBinding`), in wire codes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// Which ACLs to describe or delete (Kafka's `AclBindingFilter`): `None` and the ANY
/// codes match everything; pattern type MATCH selects the ACLs applying to a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The ACL calls, each retried while it fails with a retriable error within the client's
/// API timeout. A retry cannot duplicate an ACL: the controller never adds an identical
/// entry twice.
impl Client {
    /// Creates ACLs; the first refused one is the error (all valid ones are created).
    pub async fn create_acls(&mut self, acls: &[AclBinding]) -> Result<()> {
        retrying!(self, self.create_acls_once(acls).await)
    }

    /// The ACLs matching `filter`.
    pub async fn describe_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        retrying!(self, self.describe_acls_once(filter).await)
    }

    /// Deletes the ACLs matching `filter`; answers those deleted. After a retry that
    /// follows a lost answer, the ACLs the lost attempt deleted are not listed.
    pub async fn delete_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        retrying!(self, self.delete_acls_once(filter).await)
    }

    async fn create_acls_once(&mut self, acls: &[AclBinding]) -> Result<()> {
        let creations = acls
            .iter()
            .map(|a| {
                AclCreation::default()
                    .with_resource_type(a.resource_type)
                    .with_resource_name(text(&a.resource_name))
                    .with_resource_pattern_type(a.pattern_type)
                    .with_principal(text(&a.principal))
                    .with_host(text(&a.host))
                    .with_operation(a.operation)
                    .with_permission_type(a.permission)
            })
            .collect();
        let request = CreateAclsRequest::default().with_creations(creations);
        let response = self.send_any(&request).await?;
        for result in response.results {
            ClientError::check(
                result.error_code,
                result.error_message.as_ref().map(StrBytes::as_str),
                || "create ACL".to_owned(),
            )?;
        }
        Ok(())
    }

    async fn describe_acls_once(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(text))
            .with_pattern_type_filter(filter.pattern_type)
            .with_principal_filter(filter.principal.as_deref().map(text))
            .with_host_filter(filter.host.as_deref().map(text))
            .with_operation(filter.operation)
            .with_permission_type(filter.permission);
        let response = self.send_any(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "describe ACLs".to_owned(),
        )?;
        let mut acls = Vec::new();
        for resource in response.resources {
            for acl in resource.acls {
                acls.push(AclBinding {
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.to_string(),
                    pattern_type: resource.pattern_type,
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: acl.operation,
                    permission: acl.permission_type,
                });
            }
        }
        Ok(acls)
    }

    async fn delete_acls_once(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(filter.resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(text))
            .with_pattern_type_filter(filter.pattern_type)
            .with_principal_filter(filter.principal.as_deref().map(text))
            .with_host_filter(filter.host.as_deref().map(text))
            .with_operation(filter.operation)
            .with_permission_type(filter.permission)]);
        let response = self.send_any(&request).await?;
        let mut deleted = Vec::new();
        for result in response.filter_results {
            ClientError::check(
                result.error_code,
                result.error_message.as_ref().map(StrBytes::as_str),
                || "delete ACLs".to_owned(),
            )?;
            for m in result.matching_acls {
                deleted.push(AclBinding {
                    resource_type: m.resource_type,
                    resource_name: m.resource_name.to_string(),
                    pattern_type: m.pattern_type,
                    principal: m.principal.to_string(),
                    host: m.host.to_string(),
                    operation: m.operation,
                    permission: m.permission_type,
                });
            }
        }
        Ok(deleted)
    }
}
