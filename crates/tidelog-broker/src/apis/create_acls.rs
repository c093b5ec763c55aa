//! CreateAcls: needs ALTER on the cluster; each ACL is checked (INVALID_REQUEST with
//! Kafka's reason) and the valid ones are written by the controller together. An ACL
//! that exists already is not added again; its creation succeeds.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::CreateAclsRequest;
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::acl_wire::{entry, gate, text};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

/// v0 (literal patterns only) left Kafka in 4.0 (KIP-896).
pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: CreateAclsRequest = req.decode()?;
    let failed = |code: i16, message: &str| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(text(message)))
    };
    if let Err((code, message)) = gate(&req.access(ctx), AclOperation::Alter) {
        let results = request
            .creations
            .iter()
            .map(|_| failed(code, &message))
            .collect();
        return req.respond(&CreateAclsResponse::default().with_results(results));
    }
    let acls: Vec<_> = request
        .creations
        .iter()
        .map(|c| {
            entry(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let results = match ctx.metadata.create_acls(acls).await {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(()) => AclCreationResult::default(),
                Err(why) => failed(ResponseError::InvalidRequest.code(), &why),
            })
            .collect(),
        Err(e) => request
            .creations
            .iter()
            .map(|_| failed(e.error_code(), &e.to_string()))
            .collect(),
    };
    req.respond(&CreateAclsResponse::default().with_results(results))
}
