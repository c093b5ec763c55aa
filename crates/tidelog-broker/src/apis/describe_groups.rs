//! DescribeGroups: state, protocol, members and their assignments. An unknown group is
//! described as Dead with no members, as Kafka does before v6.

use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeGroupsRequest = req.decode()?;
    let mut groups = Vec::with_capacity(request.groups.len());
    for id in request.groups {
        let described = ctx.groups.describe(id.0.to_string()).await;
        let group = DescribedGroup::default()
            .with_group_id(id)
            .with_authorized_operations(i32::MIN);
        groups.push(match described {
            Err(e) => group
                .with_error_code(e.code())
                .with_group_state(str_bytes("")),
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
