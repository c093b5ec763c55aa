//! CreatePartitions: grows a topic to a new partition count.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quorum::RequestError;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: CreatePartitionsRequest = req.decode()?;
    let mut results = Vec::with_capacity(request.topics.len());
    let access = req.access(ctx);
    for topic in request.topics {
        let name = topic.name.0.to_string();
        // ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.
        let outcome = if access.topic(AclOperation::Alter, &name) {
            ctx.metadata
                .create_partitions(&name, topic.count, request.validate_only)
                .await
        } else {
            Err(RequestError::Remote {
                code: ResponseError::TopicAuthorizationFailed.code(),
                message: "Topic authorization failed.".to_owned(),
            })
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name);
        results.push(match outcome {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.error_code())
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
        });
    }
    req.respond(&CreatePartitionsResponse::default().with_results(results))
}
