//! AlterConfigs (the legacy, whole-set form): the given settings replace every
//! override the topic had, every dynamic config of the broker resource, or every
//! config of the group.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::broker_configs::{self, Op, SET};
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::group_configs::{self, RESOURCE_GROUP};
use super::incremental_alter_configs::refuse_resource_type;
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterConfigsRequest = req.decode()?;
    let mut responses = Vec::with_capacity(request.resources.len());
    // ALTER_CONFIGS on the resource (the cluster for brokers).
    let access = req.access(ctx);
    for resource in &request.resources {
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let refused = access.config_refused(
            AclOperation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        );
        responses.push(if let Some((code, message)) = refused {
            response
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        } else if resource.resource_type == RESOURCE_BROKER
            || resource.resource_type == RESOURCE_GROUP
        {
            let sets: Vec<Op> = resource
                .configs
                .iter()
                .map(|c| Op {
                    name: c.name.to_string(),
                    op: SET,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect();
            let name = resource.resource_name.as_str();
            let outcome = if resource.resource_type == RESOURCE_BROKER {
                broker_configs::alter_whole(ctx, name, &sets, request.validate_only).await
            } else {
                group_configs::alter_whole(ctx, name, &sets, request.validate_only).await
            };
            match outcome {
                Ok(()) => response,
                Err((code, message)) => response
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        } else if resource.resource_type != RESOURCE_TOPIC {
            let (code, message) = if resource.resource_type == RESOURCE_BROKER_LOGGER {
                (
                    ResponseError::InvalidRequest.code(),
                    "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER"
                        .to_owned(),
                )
            } else {
                refuse_resource_type(resource.resource_type)
            };
            response
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        } else {
            let name = resource.resource_name.to_string();
            let current = ctx.metadata.image().topic_configs(&name);
            let mut changes: Vec<(String, Option<String>)> = current
                .keys()
                .filter(|k| {
                    !resource
                        .configs
                        .iter()
                        .any(|c| c.name.as_str() == k.as_str())
                })
                .map(|k| (k.clone(), None))
                .collect();
            changes.extend(
                resource
                    .configs
                    .iter()
                    .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))),
            );
            let outcome = ctx
                .metadata
                .alter_topic_configs(&name, changes, request.validate_only)
                .await;
            match outcome {
                Ok(()) => response,
                Err(e) => response
                    .with_error_code(e.error_code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        });
    }
    req.respond(&AlterConfigsResponse::default().with_responses(responses))
}
