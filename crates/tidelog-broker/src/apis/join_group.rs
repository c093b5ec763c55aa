//! JoinGroup: enter a group's rebalance. The answer usually waits until every member
//! has rejoined (or the rebalance timeout passes), so it is a parked reply.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Encodable, VersionRange};
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::header::encode_response;
use tidelog_protocol::ProtocolError;
use tokio::sync::oneshot;

use super::Request;
use crate::context::Ctx;
use crate::group::{str_bytes, JoinOutcome, JoinRequest, Waiting};
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: JoinGroupRequest = req.decode()?;
    let version = req.version();
    let group = request.group_id.0.as_str();
    if let Some(code) = req
        .access(ctx)
        .refused(AclOperation::Read, ResourceType::Group, group)
    {
        return req.respond(&JoinGroupResponse::default().with_error_code(code));
    }
    let join = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req.client_id(),
        // As Kafka: the address the member connects from (DescribeGroups' HOST).
        client_host: format!("/{}", req.peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout served as both.
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member: version >= 4,
    };
    let respond_to = Responder::of(&req);
    let joined = ctx.groups.join(join).await.unwrap_or_else(|e| {
        Waiting::Now(JoinOutcome {
            error: e.code(),
            generation: -1,
            ..JoinOutcome::default()
        })
    });
    match joined {
        Waiting::Now(outcome) => respond_to.send(&response(outcome, version)),
        Waiting::Later(rx, wait) => Ok(later(
            ctx,
            rx,
            wait,
            respond_to,
            move |outcome| response(outcome, version),
            |error| JoinOutcome {
                error,
                generation: -1,
                ..JoinOutcome::default()
            },
        )),
    }
}

fn response(o: JoinOutcome, version: i16) -> JoinGroupResponse {
    let protocol_name = match (&o.protocol, version >= 7) {
        (Some(p), _) => Some(str_bytes(p)),
        (None, true) => None,
        (None, false) => Some(str_bytes("")),
    };
    JoinGroupResponse::default()
        .with_error_code(o.error)
        .with_generation_id(o.generation)
        .with_protocol_type(o.protocol_type.as_deref().map(str_bytes))
        .with_protocol_name(protocol_name)
        .with_leader(str_bytes(&o.leader))
        .with_skip_assignment(o.skip_assignment && version >= 9)
        .with_member_id(str_bytes(&o.member_id))
        .with_members(
            o.members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(&id))
                        .with_group_instance_id(instance.as_deref().map(str_bytes))
                        .with_metadata(metadata)
                })
                .collect(),
        )
}

/// What a parked reply needs from its request to be encoded later.
#[derive(Clone)]
pub(crate) struct Responder {
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
}

impl Responder {
    pub(crate) fn of(req: &Request) -> Responder {
        Responder {
            correlation_id: req.header.correlation_id,
            api_key: req.header.api_key,
            api_version: req.header.api_version,
            metrics: std::sync::Arc::clone(&req.metrics),
        }
    }

    pub(crate) fn send<T: Encodable + super::ErrorCodes>(
        self,
        body: &T,
    ) -> Result<Reply, ProtocolError> {
        super::count_errors(&self.metrics, self.api_key, body);
        encode_response(self.correlation_id, self.api_key, self.api_version, body).map(Reply::Bytes)
    }
}

/// A reply parked on the coordinator: answered when the state machine sends the
/// outcome, with REBALANCE_IN_PROGRESS after `wait`, or NOT_COORDINATOR at shutdown.
pub(crate) fn later<O, T, F, E>(
    ctx: &Ctx,
    rx: oneshot::Receiver<O>,
    wait: Duration,
    respond_to: Responder,
    build: F,
    error: E,
) -> Reply
where
    O: Send + 'static,
    T: Encodable + super::ErrorCodes,
    F: FnOnce(O) -> T + Send + 'static,
    E: FnOnce(i16) -> O + Send + 'static,
{
    let mut shutdown = ctx.shutdown.clone();
    Reply::Later(Box::pin(async move {
        let outcome = tokio::select! {
            got = tokio::time::timeout(wait, rx) => match got {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => error(ResponseError::UnknownMemberId.code()),
                Err(_) => error(ResponseError::RebalanceInProgress.code()),
            },
            _ = shutdown.wait_for(|stopping| *stopping) => error(ResponseError::NotCoordinator.code()),
        };
        respond_to.send(&build(outcome)).unwrap_or(Reply::Close)
    }))
}
