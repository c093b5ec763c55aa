//! AddOffsetsToTxn: a consumer group's offsets join the producer's open transaction
//! (its TxnOffsetCommits follow). Creates `__consumer_offsets` if needed, since the
//! group's offsets will be written there when the transaction commits.
//!
//! v4 only adds TRANSACTION_ABORTABLE to the codes it may answer (KIP-890); tidelog
//! has no state that asks a producer to abort, so v4 answers as v3. A TV2 client does
//! not send it: TxnOffsetCommit v5 adds the group itself.

use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::ensure_offsets_topic;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AddOffsetsToTxnRequest = req.decode()?;
    let producer_fenced = req.version() >= 2;
    // WRITE on the transactional id, READ on the group.
    let access = req.access(ctx);
    let refused = access
        .refused(
            AclOperation::Write,
            ResourceType::TransactionalId,
            request.transactional_id.0.as_str(),
        )
        .or_else(|| access.refused(AclOperation::Read, ResourceType::Group, &request.group_id.0));
    if let Some(code) = refused {
        return req.respond(&AddOffsetsToTxnResponse::default().with_error_code(code));
    }
    let code = match ensure_offsets_topic(ctx).await {
        Ok(()) => ctx
            .txns
            .add_offsets(
                request.transactional_id.0.as_str(),
                (request.producer_id.0, request.producer_epoch),
                request.group_id.0.as_str(),
                false,
            )
            .await
            .err()
            .map_or(0, |e| e.code(producer_fenced)),
        Err(e) => e.code(),
    };
    req.respond(&AddOffsetsToTxnResponse::default().with_error_code(code))
}
