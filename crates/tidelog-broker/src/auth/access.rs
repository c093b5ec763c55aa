//! What one request's principal may do: the checks handlers make.

use std::net::IpAddr;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tidelog_controller::acl::{AclIndex, AclOperation, Decision, ResourceType, CLUSTER_NAME};
use tidelog_controller::MetadataImage;

use crate::apis::Request;
use crate::context::Ctx;

/// The authorizer's answers for one request (one ACL snapshot for all its checks).
pub(crate) struct Access {
    /// `None`: no authorizer, everything is allowed.
    index: Option<Arc<AclIndex>>,
    principal: String,
    host: String,
}

impl Request {
    /// The authorizer's view of this request's principal and client address.
    pub(crate) fn access(&self, ctx: &Ctx) -> Access {
        Access::of(
            ctx.authorizer.as_deref(),
            &ctx.metadata.image(),
            self.session.principal.clone(),
            self.peer.ip(),
        )
    }
}

impl Access {
    /// What `principal`, connecting from `peer`, may do under `authorizer` (`None`:
    /// everything) and the ACLs of `image`. The admin port asks here too.
    pub(crate) fn of(
        authorizer: Option<&super::Authorizer>,
        image: &MetadataImage,
        principal: String,
        peer: IpAddr,
    ) -> Access {
        Access {
            index: authorizer.map(|a| a.index(image)),
            principal,
            host: peer.to_canonical().to_string(),
        }
    }

    /// The principal the checks are made for.
    pub(crate) fn principal(&self) -> &str {
        &self.principal
    }

    /// No authorizer: everything allowed.
    #[cfg(test)]
    pub(crate) fn unrestricted() -> Access {
        Access {
            index: None,
            principal: "User:ANONYMOUS".to_owned(),
            host: "127.0.0.1".to_owned(),
        }
    }

    /// Whether an authorizer is configured (the ACL APIs answer SECURITY_DISABLED
    /// without one).
    pub(crate) fn enabled(&self) -> bool {
        self.index.is_some()
    }

    pub(crate) fn allows(&self, op: AclOperation, resource: ResourceType, name: &str) -> bool {
        self.index.as_ref().is_none_or(|index| {
            index.authorize(&self.principal, &self.host, op, resource, name) == Decision::Allowed
        })
    }

    pub(crate) fn topic(&self, op: AclOperation, name: &str) -> bool {
        self.allows(op, ResourceType::Topic, name)
    }

    pub(crate) fn group(&self, op: AclOperation, name: &str) -> bool {
        self.allows(op, ResourceType::Group, name)
    }

    pub(crate) fn cluster(&self, op: AclOperation) -> bool {
        self.allows(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub(crate) fn transactional_id(&self, op: AclOperation, id: &str) -> bool {
        self.allows(op, ResourceType::TransactionalId, id)
    }

    /// Allowed on at least one resource of the type (Kafka's `authorizeByResourceType`).
    pub(crate) fn on_any(&self, op: AclOperation, resource: ResourceType) -> bool {
        self.index.as_ref().is_none_or(|index| {
            index.authorize_by_resource_type(&self.principal, &self.host, op, resource)
                == Decision::Allowed
        })
    }

    /// The KIP-430 bitfield: bit `1 << code` for each operation the resource type
    /// supports that the principal may do on it.
    pub(crate) fn operations(&self, resource: ResourceType, name: &str) -> i32 {
        resource
            .supported_operations()
            .iter()
            .filter(|op| self.allows(**op, resource, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Kafka's authorization error for the resource's type when `op` on it is not
    /// allowed (TOPIC_/GROUP_/TRANSACTIONAL_ID_/CLUSTER_AUTHORIZATION_FAILED).
    pub(crate) fn refused(
        &self,
        op: AclOperation,
        resource: ResourceType,
        name: &str,
    ) -> Option<i16> {
        (!self.allows(op, resource, name)).then(|| denied_code(resource))
    }

    /// The authorization error for `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
    /// resource of the configs APIs, if refused: a topic is checked on the topic, a
    /// group on the group, brokers, broker loggers and client metrics on the cluster.
    pub(crate) fn config_refused(
        &self,
        op: AclOperation,
        config_resource_type: i8,
        name: &str,
    ) -> Option<(i16, String)> {
        const TOPIC: i8 = 2;
        const GROUP: i8 = 32;
        let (resource, name) = match config_resource_type {
            TOPIC => (ResourceType::Topic, name),
            GROUP => (ResourceType::Group, name),
            _ => (ResourceType::Cluster, CLUSTER_NAME),
        };
        self.refused(op, resource, name).map(|code| {
            let what = match resource {
                ResourceType::Topic => "Topic",
                ResourceType::Group => "Group",
                _ => "Cluster",
            };
            (code, format!("{what} authorization failed."))
        })
    }

    /// CLUSTER_AUTHORIZATION_FAILED unless `op` is allowed on the cluster.
    pub(crate) fn require_cluster(&self, op: AclOperation) -> Result<(), i16> {
        if self.cluster(op) {
            Ok(())
        } else {
            Err(ResponseError::ClusterAuthorizationFailed.code())
        }
    }
}

/// Kafka's error code for a refused operation on a resource of this type.
pub(crate) fn denied_code(resource: ResourceType) -> i16 {
    match resource {
        ResourceType::Topic => ResponseError::TopicAuthorizationFailed.code(),
        ResourceType::Group => ResponseError::GroupAuthorizationFailed.code(),
        ResourceType::TransactionalId => ResponseError::TransactionalIdAuthorizationFailed.code(),
        ResourceType::DelegationToken => ResponseError::DelegationTokenAuthorizationFailed.code(),
        _ => ResponseError::ClusterAuthorizationFailed.code(),
    }
}
