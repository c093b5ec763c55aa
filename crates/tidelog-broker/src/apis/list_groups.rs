//! ListGroups: every group this node coordinates, optionally filtered by state (v4+)
//! and type (v5+: "classic", "consumer" (KIP-848) or "share" (KIP-932));
//! COORDINATOR_LOAD_IN_PROGRESS
//! while an offsets partition is still loading.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListGroupsRequest = req.decode()?;
    let wants_state = |state: &str| {
        request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|s| s.eq_ignore_ascii_case(state))
    };
    let wants_type = |kind: &str| {
        request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.eq_ignore_ascii_case(kind))
    };
    let (listed, loading) = ctx.groups.list_groups().await;
    if loading {
        let loading = ListGroupsResponse::default()
            .with_error_code(ResponseError::CoordinatorLoadInProgress.code());
        return req.respond(&loading);
    }
    // DESCRIBE on the cluster lists every group; otherwise those with DESCRIBE.
    let access = req.access(ctx);
    let all_groups = access.cluster(AclOperation::Describe);
    let groups = listed
        .into_iter()
        .filter(|g| wants_type(g.group_type) && wants_state(g.state))
        .filter(|g| all_groups || access.group(AclOperation::Describe, &g.group_id))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type))
                .with_group_state(str_bytes(g.state))
                .with_group_type(str_bytes(g.group_type))
        })
        .collect();
    req.respond(&ListGroupsResponse::default().with_groups(groups))
}
