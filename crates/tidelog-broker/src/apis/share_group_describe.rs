//! ShareGroupDescribe (KIP-932): a share group's state, epochs, assignor, and per member
//! its epoch, subscription and assignment. Another kind of group, or an unknown id, is
//! GROUP_ID_NOT_FOUND, as in Kafka; a group whose topics the principal may not all
//! describe is TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_request::ShareGroupDescribeRequest;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, ShareGroupDescribeResponse, TopicPartitions,
};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::authorized_operations::if_requested;
use super::Request;
use crate::context::Ctx;
use crate::group::consumer::{self, TopicsView};
use crate::group::share::SHARE_ASSIGNOR;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };

fn assignment(a: &consumer::Assignment, topics: &TopicsView) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, partitions)| {
                let name = topics.names.get(id).map(String::as_str).unwrap_or_default();
                TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(TopicName(str_bytes(name)))
                    .with_partitions(partitions.iter().copied().collect())
            })
            .collect(),
    )
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ShareGroupDescribeRequest = req.decode()?;
    let access = req.access(ctx);
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for id in request.group_ids {
        let name = id.0.to_string();
        let group = DescribedGroup::default().with_group_id(id);
        if let Some(code) = access.refused(AclOperation::Describe, ResourceType::Group, &name) {
            groups.push(group.with_error_code(code));
            continue;
        }
        let operations = if_requested(
            request.include_authorized_operations,
            access.operations(ResourceType::Group, &name),
        );
        groups.push(match ctx.groups.share_describe(name.clone()).await {
            Err(e) => group.with_error_code(e.code()),
            Ok((None, _)) => {
                // Kafka's message tells a group of another kind from no group at all.
                let message = match ctx.groups.share_offsets_topics(name.clone()).await {
                    Ok(Err(refusal)) => refusal.message,
                    _ => format!("Group {name} not found."),
                };
                DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(&name)))
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(str_bytes(&message)))
            }
            Ok((Some(g), topics))
                if !g
                    .members
                    .values()
                    .flat_map(|m| m.assignment.keys())
                    .filter_map(|id| topics.names.get(id))
                    .all(|topic| access.topic(AclOperation::Describe, topic)) =>
            {
                // As ConsumerGroupDescribe (KAFKA-18813): no members, no topic names.
                group
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes(
                        super::consumer_group_describe::HIDDEN_TOPICS,
                    )))
            }
            Ok((Some(g), topics)) => group
                .with_group_state(str_bytes(g.state_name()))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(SHARE_ASSIGNOR))
                .with_authorized_operations(operations)
                .with_members(
                    g.members
                        .values()
                        .map(|m| {
                            Member::default()
                                .with_member_id(str_bytes(&m.id))
                                .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(&m.client_id))
                                .with_client_host(str_bytes(&m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names
                                        .iter()
                                        .map(|t| TopicName(str_bytes(t)))
                                        .collect(),
                                )
                                .with_assignment(assignment(&m.assignment, &topics))
                        })
                        .collect(),
                ),
        });
    }
    req.respond(&ShareGroupDescribeResponse::default().with_groups(groups))
}
