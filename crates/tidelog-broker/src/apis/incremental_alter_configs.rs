//! IncrementalAlterConfigs: set, delete, append to or subtract from single settings of
//! a topic, of a broker's dynamic configs (`super::broker_configs`), or of a group
//! (`super::group_configs`), or this node's log levels (`crate::log_levels`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::broker_configs::{self, Op, APPEND, DELETE, SET, SUBTRACT};
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::group_configs::{self, RESOURCE_GROUP};
use super::Request;
use crate::context::Ctx;
use crate::log_levels::{self, LevelChange};
use crate::net::Reply;
use crate::topic_config::effective;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: IncrementalAlterConfigsRequest = req.decode()?;
    let mut responses = Vec::with_capacity(request.resources.len());
    // ALTER_CONFIGS on the resource (the cluster for brokers).
    let access = req.access(ctx);
    let key = |r: &AlterConfigsResource| (r.resource_type, r.resource_name.to_string());
    let mut named: std::collections::HashMap<(i8, String), usize> =
        std::collections::HashMap::with_capacity(request.resources.len());
    for r in &request.resources {
        *named.entry(key(r)).or_default() += 1;
    }
    for resource in &request.resources {
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let refused = access.config_refused(
            AclOperation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        );
        // As Kafka's ConfigAdminManager: a resource named twice is refused, both times.
        let twice = named.get(&key(resource)).is_some_and(|n| *n > 1);
        let outcome = match refused {
            Some(refused) => Err(refused),
            None if twice => Err((
                ResponseError::InvalidRequest.code(),
                "Each resource must appear at most once.".to_string(),
            )),
            None => alter(ctx, resource, request.validate_only).await,
        };
        responses.push(match outcome {
            Ok(()) => response,
            Err((code, message)) => response
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    req.respond(&IncrementalAlterConfigsResponse::default().with_responses(responses))
}

/// A resource type whose configs cannot be altered here (Kafka's answer to one it
/// does not know).
pub(crate) fn refuse_resource_type(resource_type: i8) -> (i16, String) {
    (
        ResponseError::InvalidRequest.code(),
        format!("Unknown resource type {resource_type}"),
    )
}

/// The entries of a BROKER or GROUP resource as the config managers take them.
fn ops_of(resource: &AlterConfigsResource) -> Vec<Op> {
    resource
        .configs
        .iter()
        .map(|c| Op {
            name: c.name.to_string(),
            op: c.config_operation,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect()
}

async fn alter(
    ctx: &Ctx,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    if resource.resource_type == RESOURCE_BROKER {
        let ops = ops_of(resource);
        return broker_configs::alter_incremental(
            ctx,
            resource.resource_name.as_str(),
            &ops,
            validate_only,
        )
        .await;
    }
    if resource.resource_type == RESOURCE_GROUP {
        let ops = ops_of(resource);
        return group_configs::alter_incremental(
            ctx,
            resource.resource_name.as_str(),
            &ops,
            validate_only,
        )
        .await;
    }
    if resource.resource_type == RESOURCE_BROKER_LOGGER {
        log_levels::check_resource_name(&resource.resource_name, ctx.node_id())?;
        let changes: Vec<LevelChange> = resource
            .configs
            .iter()
            .map(|c| LevelChange {
                logger: c.name.to_string(),
                op: c.config_operation,
                level: c.value.as_ref().map(|v| v.to_string()),
            })
            .collect();
        return log_levels::process().alter(&changes, validate_only);
    }
    if resource.resource_type != RESOURCE_TOPIC {
        return Err(refuse_resource_type(resource.resource_type));
    }
    let name = resource.resource_name.to_string();
    let image = ctx.metadata.image();
    let topic = image.topic(&name).ok_or((
        ResponseError::UnknownTopicOrPartition.code(),
        format!("topic {name} does not exist"),
    ))?;
    let current = effective(&ctx.settings(), &topic.configs);
    let mut changes = Vec::with_capacity(resource.configs.len());
    for c in &resource.configs {
        let key = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        let list = || -> Vec<String> {
            current
                .get(&key)
                .map(|(v, _)| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        let change = match c.config_operation {
            SET => (key, value),
            DELETE => (key, None),
            APPEND => {
                let mut items = list();
                for v in value.iter().flat_map(|v| v.split(',')) {
                    if !items.iter().any(|i| i == v.trim()) {
                        items.push(v.trim().to_string());
                    }
                }
                (key, Some(items.join(",")))
            }
            SUBTRACT => {
                let remove: Vec<String> = value
                    .iter()
                    .flat_map(|v| v.split(','))
                    .map(|s| s.trim().to_string())
                    .collect();
                let items: Vec<String> =
                    list().into_iter().filter(|i| !remove.contains(i)).collect();
                (key, Some(items.join(",")))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("unknown config operation {other}"),
                ))
            }
        };
        changes.push(change);
    }
    ctx.metadata
        .alter_topic_configs(&name, changes, validate_only)
        .await
        .map_err(|e| (e.error_code(), e.to_string()))
}
