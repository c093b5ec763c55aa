//! ConsumerGroupDescribe (KIP-848): a consumer group's state, epochs, assignor, and per
//! member its epoch, subscription, current and target assignment. A classic group or
//! an unknown id is GROUP_ID_NOT_FOUND, as in Kafka; so is a group whose topics the
//! principal may not all describe TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, ConsumerGroupDescribeResponse, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::authorized_operations::if_requested;
use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::group::consumer::describe::ConsumerDescribe;
use crate::group::consumer::{self, ConsumerMember, TopicsView};
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

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

/// Whether the principal may describe every topic the members are assigned or target.
fn describes_all(access: &Access, topics: &TopicsView, members: &[ConsumerMember]) -> bool {
    members
        .iter()
        .flat_map(|m| m.current.assigned.keys().chain(m.target.keys()))
        .filter_map(|id| topics.names.get(id))
        .all(|name| access.topic(AclOperation::Describe, name))
}

/// Why a group is described without its members (KAFKA-18813).
pub(crate) const HIDDEN_TOPICS: &str =
    "The group has assigned topics that the client is not authorized to describe.";

/// A group whose topics the principal may not all describe is answered with
/// TOPIC_AUTHORIZATION_FAILED and without its members.
fn hidden_topics(group: DescribedGroup) -> DescribedGroup {
    group
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_error_message(Some(str_bytes(HIDDEN_TOPICS)))
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ConsumerGroupDescribeRequest = req.decode()?;
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
        let not_found = |message: String| {
            DescribedGroup::default()
                .with_group_id(kafka_protocol::messages::GroupId(str_bytes(&name)))
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(str_bytes(&message)))
        };
        groups.push(match ctx.groups.consumer_describe(name.clone()).await {
            Err(e) => group.with_error_code(e.code()),
            Ok((ConsumerDescribe::NotFound, _)) => not_found(format!("Group {name} not found.")),
            Ok((ConsumerDescribe::NotConsumer, _)) => {
                not_found(format!("Group {name} is not a consumer group."))
            }
            Ok((ConsumerDescribe::Group(g), topics))
                if !describes_all(&access, &topics, &g.members) =>
            {
                hidden_topics(group)
            }
            Ok((ConsumerDescribe::Group(g), topics)) => group
                .with_group_state(str_bytes(g.state))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(&g.assignor))
                .with_authorized_operations(operations)
                .with_members(
                    g.members
                        .iter()
                        .map(|m| {
                            Member::default()
                                .with_member_id(str_bytes(&m.id))
                                .with_instance_id(m.metadata.instance_id.as_deref().map(str_bytes))
                                .with_rack_id(m.metadata.rack_id.as_deref().map(str_bytes))
                                .with_member_epoch(m.current.member_epoch)
                                .with_client_id(str_bytes(&m.metadata.client_id))
                                .with_client_host(str_bytes(&m.metadata.client_host))
                                .with_subscribed_topic_names(
                                    m.metadata
                                        .subscribed_topic_names
                                        .iter()
                                        .map(|t| TopicName(str_bytes(t)))
                                        .collect(),
                                )
                                .with_subscribed_topic_regex(
                                    m.metadata.subscribed_topic_regex.as_deref().map(str_bytes),
                                )
                                .with_assignment(assignment(&m.current.assigned, &topics))
                                .with_target_assignment(assignment(&m.target, &topics))
                                // 0: a classic member (JoinGroup), 1: the consumer protocol.
                                .with_member_type(if m.metadata.classic.is_some() { 0 } else { 1 })
                        })
                        .collect(),
                ),
        });
    }
    req.respond(&ConsumerGroupDescribeResponse::default().with_groups(groups))
}
