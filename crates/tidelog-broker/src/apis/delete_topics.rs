//! DeleteTopics: removed from the metadata; each replica renames its partition directories
//! aside at once and removes them after `file.delete.delay.ms`. Internal topics are refused
//! by the controller.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;
use crate::settings;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 6 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DeleteTopicsRequest = req.decode()?;
    let version = req.version();
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut results = Vec::with_capacity(wanted.len());
    // DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = req.access(ctx);
    for (name, id) in wanted {
        let name = name.or_else(|| {
            ctx.metadata
                .image()
                .topic_by_id(&id)
                .map(|t| t.name.clone())
        });
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
            .with_topic_id(id);
        let outcome = match (&name, ctx.config.get(settings::DELETE_TOPIC_ENABLE)) {
            (_, false) => Err((
                ResponseError::TopicDeletionDisabled.code(),
                "delete.topic.enable is false".to_string(),
            )),
            (None, _) => Err((
                ResponseError::UnknownTopicId.code(),
                "unknown topic id".to_string(),
            )),
            (Some(n), _) if !access.topic(AclOperation::Delete, n) => Err((
                ResponseError::TopicAuthorizationFailed.code(),
                "Topic authorization failed.".to_string(),
            )),
            (Some(n), _) => ctx
                .metadata
                .delete_topic(n)
                .await
                .map_err(|e| (e.error_code(), e.to_string())),
        };
        results.push(match outcome {
            Ok(deleted_id) => result.with_topic_id(if version >= 6 {
                deleted_id
            } else {
                uuid::Uuid::nil()
            }),
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message((version >= 5).then(|| StrBytes::from_string(message))),
        });
    }
    req.respond(&DeleteTopicsResponse::default().with_responses(results))
}
