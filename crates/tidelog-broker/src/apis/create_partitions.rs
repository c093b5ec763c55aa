//! CreatePartitions: grows a topic to a new partition count.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: CreatePartitionsRequest = req.decode()?;
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let outcome = ctx
            .metadata
            .create_partitions(&name, topic.count, request.validate_only)
            .await;
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
