//! DescribeConfigs: a topic's effective settings with where each came from, or a
//! broker's settings.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::topic_config;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::topic_config::{effective, ConfigSource};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

pub(crate) const RESOURCE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_BROKER: i8 = 4;

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeConfigsRequest = req.decode()?;
    let version = req.version();
    // DESCRIBE_CONFIGS on the resource (the cluster for brokers).
    let access = req.access(ctx);
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let keys: Option<Vec<String>> = resource
                .configuration_keys
                .as_ref()
                .map(|keys| keys.iter().map(|k| k.to_string()).collect());
            let wanted = |name: &str| keys.as_ref().is_none_or(|k| k.iter().any(|w| w == name));
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let described = match access.config_refused(
                AclOperation::DescribeConfigs,
                resource.resource_type,
                &resource.resource_name,
            ) {
                Some(refused) => Err(refused),
                None => describe(ctx, resource.resource_type, &resource.resource_name),
            };
            match described {
                Ok(entries) => {
                    let configs = entries
                        .into_iter()
                        .filter(|(name, _, _)| wanted(name))
                        .map(|(name, value, source)| {
                            entry(
                                name,
                                value,
                                source,
                                request.include_synonyms,
                                request.include_documentation,
                                version,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    req.respond(&DescribeConfigsResponse::default().with_results(results))
}

type Entries = Vec<(String, String, ConfigSource)>;

fn describe(ctx: &Ctx, resource_type: i8, name: &str) -> Result<Entries, (i16, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let image = ctx.metadata.image();
            let topic = image.topic(name).ok_or((
                ResponseError::UnknownTopicOrPartition.code(),
                format!("topic {name} does not exist"),
            ))?;
            Ok(effective(&ctx.config, &topic.configs)
                .into_iter()
                .map(|(k, (v, source))| (k, v, source))
                .collect())
        }
        RESOURCE_BROKER => {
            if !name.is_empty() && name != ctx.node_id().to_string() {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("this is broker {}, not {name}", ctx.node_id()),
                ));
            }
            Ok(ctx
                .config
                .all()
                .map(|(k, v, is_default)| {
                    let source = if is_default {
                        ConfigSource::Default
                    } else {
                        ConfigSource::Broker
                    };
                    (k.to_string(), v.to_string(), source)
                })
                .collect())
        }
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("resource type {other} has no configs here"),
        )),
    }
}

fn entry(
    name: String,
    value: String,
    source: ConfigSource,
    synonyms: bool,
    documentation: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    let def = topic_config::all().iter().find(|d| d.name == name);
    // A private key or password is answered as Kafka answers a sensitive config:
    // flagged, without its value.
    let sensitive = crate::config::is_sensitive(&name);
    let shown = (!sensitive).then(|| StrBytes::from_string(value));
    let mut result = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.clone()))
        .with_value(shown.clone())
        .with_read_only(false)
        .with_is_sensitive(sensitive)
        .with_config_source(source as i8);
    if synonyms {
        result = result.with_synonyms(vec![DescribeConfigsSynonym::default()
            .with_name(StrBytes::from_string(name))
            .with_value(shown)
            .with_source(source as i8)]);
    }
    if version >= 3 {
        if let Some(def) = def {
            result = result.with_config_type(def.config_type.kafka_code());
            if documentation {
                result = result.with_documentation(Some(StrBytes::from_static_str(def.doc)));
            }
        }
    }
    result
}
