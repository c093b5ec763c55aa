//! DescribeGroups: state, protocol, members and their assignments. An unknown group, or
//! a consumer-protocol (KIP-848) group, is described as Dead with no members, as Kafka
//! does before v6; from v6 it also carries GROUP_ID_NOT_FOUND and Kafka's message
//! ("not found", or "is not a classic group") (KIP-1043). From v3, when asked, each group's
//! authorized operations are every operation a group supports (no authorizer).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::authorized_operations::{self, if_requested};
use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeGroupsRequest = req.decode()?;
    let version = req.version();
    let access = req.access(ctx);
    let wants_operations = version >= 3 && request.include_authorized_operations;
    let mut groups = Vec::with_capacity(request.groups.len());
    for id in request.groups {
        let name = id.0.to_string();
        // DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED.
        if let Some(code) = access.refused(AclOperation::Describe, ResourceType::Group, &name) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(code)
                    .with_group_state(str_bytes("")),
            );
            continue;
        }
        let operations = if_requested(
            wants_operations,
            access.operations(ResourceType::Group, &name),
        );
        let described = ctx.groups.describe(name.clone()).await;
        let group = DescribedGroup::default()
            .with_group_id(id)
            .with_authorized_operations(operations);
        groups.push(match described {
            Err(e) => group
                .with_error_code(e.code())
                .with_group_state(str_bytes("")),
            Ok(d) if version >= 6 && d.state == "Dead" && d.members.is_empty() => group
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(str_bytes(&if d.not_classic {
                    format!("Group {name} is not a classic group.")
                } else {
                    format!("Group {name} not found.")
                })))
                .with_group_state(str_bytes(d.state))
                .with_authorized_operations(authorized_operations::NOT_REQUESTED),
            Ok(d) => group
                .with_group_state(str_bytes(d.state))
                .with_protocol_type(str_bytes(&d.protocol_type))
                .with_protocol_data(str_bytes(&d.protocol))
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(str_bytes(&m.member_id))
                                .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                                .with_client_id(str_bytes(&m.client_id))
                                .with_client_host(str_bytes(&m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                ),
        });
    }
    req.respond(&DescribeGroupsResponse::default().with_groups(groups))
}
