//! DescribeTransactions: state, producer, timeout, start time and partitions of each
//! transactional id this node coordinates.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::{
    DescribeTransactionsResponse, TopicData, TransactionState,
};
use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeTransactionsRequest = req.decode()?;
    let mut states = Vec::with_capacity(request.transactional_ids.len());
    // DESCRIBE on the transactional id; its partitions of topics without DESCRIBE are
    // left out.
    let access = req.access(ctx);
    for id in request.transactional_ids {
        let answer = TransactionState::default().with_transactional_id(id.clone());
        if let Some(code) =
            access.refused(AclOperation::Describe, ResourceType::TransactionalId, &id.0)
        {
            states.push(
                answer
                    .with_error_code(code)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
            );
            continue;
        }
        let described = ctx.txns.describe(id.0.as_str()).await;
        states.push(match described {
            Ok(meta) => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, p) in meta
                    .partitions
                    .iter()
                    .filter(|(topic, _)| access.topic(AclOperation::Describe, topic))
                {
                    by_topic.entry(topic.clone()).or_default().push(*p);
                }
                let topics = by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        TopicData::default()
                            .with_topic(TopicName(StrBytes::from_string(topic)))
                            .with_partitions(partitions)
                    })
                    .collect();
                answer
                    .with_transaction_state(StrBytes::from_static_str(meta.state.name()))
                    .with_transaction_timeout_ms(meta.timeout_ms)
                    .with_transaction_start_time_ms(meta.start_ms)
                    .with_producer_id(ProducerId(meta.producer_id))
                    .with_producer_epoch(meta.epoch)
                    .with_topics(topics)
            }
            Err(e) => answer
                .with_error_code(e.code(true))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1),
        });
    }
    req.respond(&DescribeTransactionsResponse::default().with_transaction_states(states))
}
