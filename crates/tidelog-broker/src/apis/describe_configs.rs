//! DescribeConfigs: a topic's effective settings with where each came from, a
//! broker's settings (`crate::dynamic_config::describe_broker`), or a group's
//! (`super::group_configs`), or this node's log levels (`crate::log_levels`).

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
use crate::dynamic_config::{self, BrokerEntry};
use crate::group_config;
use crate::log_levels;
use crate::net::Reply;
use crate::topic_config::{effective, ConfigSource};

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

pub(crate) const RESOURCE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_BROKER: i8 = 4;
pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;

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
                        .filter(|e| wanted(&e.name))
                        .map(|e| {
                            entry(
                                resource.resource_type,
                                e,
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

type Entries = Vec<BrokerEntry>;

fn describe(ctx: &Ctx, resource_type: i8, name: &str) -> Result<Entries, (i16, String)> {
    let image = ctx.metadata.image();
    match resource_type {
        RESOURCE_TOPIC => {
            let topic = image.topic(name).ok_or((
                ResponseError::UnknownTopicOrPartition.code(),
                format!("topic {name} does not exist"),
            ))?;
            let broker = ctx.settings();
            Ok(effective(&broker, &topic.configs)
                .into_iter()
                .map(|(k, (v, source))| {
                    // The topic's own override, then every broker level that sets
                    // the default (Kafka's synonyms of a topic config).
                    let mut synonyms: Vec<(String, String, ConfigSource)> = topic
                        .configs
                        .get(&k)
                        .map(|own| (k.clone(), own.clone(), ConfigSource::Topic))
                        .into_iter()
                        .collect();
                    if let Some(key) = topic_config::broker_key_for_topic_config(&k) {
                        synonyms.extend(dynamic_config::broker_synonyms(
                            &ctx.config,
                            &image,
                            key,
                            true,
                        ));
                    }
                    BrokerEntry {
                        name: k,
                        value: v,
                        source,
                        read_only: false,
                        synonyms,
                    }
                })
                .collect())
        }
        RESOURCE_BROKER => dynamic_config::describe_broker(&ctx.config, &image, name)
            .map_err(|message| (ResponseError::InvalidRequest.code(), message)),
        super::group_configs::RESOURCE_GROUP => super::group_configs::describe(ctx, name),
        RESOURCE_BROKER_LOGGER => {
            log_levels::check_resource_name(name, ctx.node_id())?;
            Ok(log_levels::process()
                .describe()
                .into_iter()
                .map(|(logger, level)| BrokerEntry {
                    name: logger,
                    value: level,
                    source: ConfigSource::DynamicBrokerLogger,
                    read_only: false,
                    synonyms: Vec::new(),
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
    resource_type: i8,
    e: BrokerEntry,
    synonyms: bool,
    documentation: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    let topic_def = topic_config::all().iter().find(|d| d.name == e.name);
    // A private key or password is answered as Kafka answers a sensitive config:
    // flagged, without its value.
    let sensitive = crate::config::is_sensitive(&e.name);
    let hide = |v: String| (!sensitive).then(|| StrBytes::from_string(v));
    let mut result = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(e.name.clone()))
        .with_value(hide(e.value))
        .with_read_only(e.read_only)
        .with_is_sensitive(sensitive)
        .with_config_source(e.source as i8);
    if synonyms {
        result = result.with_synonyms(
            e.synonyms
                .into_iter()
                .map(|(name, value, source)| {
                    DescribeConfigsSynonym::default()
                        .with_name(StrBytes::from_string(name))
                        .with_value(hide(value))
                        .with_source(source as i8)
                })
                .collect(),
        );
    }
    if version >= 3 {
        let group = resource_type == super::group_configs::RESOURCE_GROUP;
        let config_type = if group {
            group_config::config_type(&e.name)
        } else {
            topic_def.map_or_else(
                || dynamic_config::config_type(&e.name),
                |def| def.config_type,
            )
        };
        result = result.with_config_type(config_type.kafka_code());
        if documentation {
            let doc = if group {
                group_config::doc(&e.name)
            } else {
                topic_def.map(|def| def.doc)
            };
            if let Some(doc) = doc {
                result = result.with_documentation(Some(StrBytes::from_static_str(doc)));
            }
        }
    }
    result
}
