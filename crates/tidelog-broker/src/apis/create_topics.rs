//! CreateTopics: validated and placed by the controller; `validate_only` changes nothing.
//! A created topic's `error_message` is null (the schema default is ""), as Kafka's.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreateTopicsRequest;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quorum::RequestError;
use tidelog_controller::CreateTopic;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::topic_config;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 2, max: 7 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: CreateTopicsRequest = req.decode()?;
    let version = req.version();
    let mut results = Vec::with_capacity(request.topics.len());
    // CREATE on the cluster, or on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let access = req.access(ctx);
    let may_create_any = access.cluster(AclOperation::Create);
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let create = CreateTopic {
            name: name.clone(),
            num_partitions: topic.num_partitions,
            replication_factor: topic.replication_factor,
            assignments: topic
                .assignments
                .iter()
                .map(|a| {
                    (
                        a.partition_index,
                        a.broker_ids.iter().map(|b| b.0).collect(),
                    )
                })
                .collect(),
            configs: topic
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect(),
        };
        let outcome = if may_create_any || access.topic(AclOperation::Create, &name) {
            ctx.metadata
                .create_topic(create, request.validate_only)
                .await
        } else {
            Err(RequestError::Remote {
                code: ResponseError::TopicAuthorizationFailed.code(),
                message: "Authorization failed.".to_owned(),
            })
        };
        let result = CreatableTopicResult::default().with_name(topic.name);
        results.push(match outcome {
            Ok(created) => {
                let mut result = result
                    .with_error_message(None)
                    .with_topic_id(if version >= 7 {
                        created.topic_id
                    } else {
                        uuid::Uuid::nil()
                    })
                    .with_num_partitions(created.partition_count())
                    .with_replication_factor(
                        created
                            .partitions
                            .values()
                            .next()
                            .map_or(1, |p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX)),
                    );
                if version >= 5 {
                    let configs = topic_config::effective(&ctx.settings(), &created.configs)
                        .into_iter()
                        .map(|(k, (v, source))| {
                            CreatableTopicConfigs::default()
                                .with_name(StrBytes::from_string(k))
                                .with_value(Some(StrBytes::from_string(v)))
                                .with_config_source(source as i8)
                        })
                        .collect();
                    result = result.with_configs(Some(configs));
                } else {
                    result = result.with_num_partitions(-1).with_replication_factor(-1);
                }
                result
            }
            Err(e) => {
                let result = result.with_error_code(e.error_code());
                let result = if version >= 5 {
                    result.with_num_partitions(-1).with_replication_factor(-1)
                } else {
                    result
                };
                result.with_error_message(Some(StrBytes::from_string(e.to_string())))
            }
        });
    }
    req.respond(&CreateTopicsResponse::default().with_topics(results))
}
