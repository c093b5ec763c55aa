//! TxnOffsetCommit: consumer offsets sent inside a transaction, to the group's
//! coordinator. They are written to the group's `__consumer_offsets` partition as a
//! transactional batch of the producer and become the group's committed offsets only
//! at the transaction's COMMIT marker (an ABORT drops them), which the transaction
//! coordinator writes there when the transaction ends, as Kafka divides the work.
//!
//! When this node also coordinates the transaction, the offsets are first verified
//! with it (the transaction is open, the group was added, the producer is current),
//! under a guard that a marker arriving meanwhile revokes. Unknown partitions are
//! refused one by one.
//!
//! v5 is a TV2 client's (KIP-890 part 2): the request also does AddOffsetsToTxn's work,
//! adding the group's offsets partition to the transaction (opening it) before the
//! offsets are verified, so the client sends no AddOffsetsToTxn; when another node
//! coordinates the transaction the add is AddPartitionsToTxn v5 there, as Kafka's group
//! coordinator asks. v5 also allows TRANSACTION_ABORTABLE, which tidelog has no state to
//! answer with.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::per_partition::answer_each;
use super::Request;
use crate::context::Ctx;
use crate::group::CommitRequest;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: TxnOffsetCommitRequest = req.decode()?;
    let producer_fenced = req.version() >= 3;
    let implicit_add = req.version() >= 5;
    let group = request.group_id.0.to_string();
    let txn_id = request.transactional_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    let commit = CommitRequest {
        group_id: group.clone(),
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        offsets: request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_ref().map(|m| m.to_string()),
                    )
                })
            })
            .collect(),
    };
    // WRITE on the transactional id, READ on the group (either refused answers every
    // partition with its error) and READ on each topic (its partitions refused).
    let access = req.access(ctx);
    let whole_refused = access
        .refused(AclOperation::Write, ResourceType::TransactionalId, &txn_id)
        .or_else(|| access.refused(AclOperation::Read, ResourceType::Group, &group));
    let topic_refused = |name: &str| access.refused(AclOperation::Read, ResourceType::Topic, name);
    let mut commit = commit;
    commit
        .offsets
        .retain(|(topic, ..)| whole_refused.is_none() && topic_refused(topic).is_none());
    let count = commit.offsets.len();
    let codes = if count == 0 && whole_refused.is_some() {
        Vec::new()
    } else {
        let added = if implicit_add {
            ctx.txns
                .add_offsets_implicitly(&txn_id, producer, &group)
                .await
        } else {
            Ok(())
        };
        match added {
            Err(e) => vec![e.code(producer_fenced); count],
            Ok(()) if ctx.txns.coordinates(&txn_id) => {
                commit_verified(ctx, commit, &txn_id, producer, producer_fenced).await
            }
            Ok(()) => ctx.groups.txn_commit(commit, producer, None).await,
        }
    };
    let mut codes = codes.into_iter();
    let topics = answer_each(
        request.topics,
        |t| &t.partitions,
        |t, p| {
            let code = match whole_refused.or_else(|| topic_refused(&t.name.0)) {
                Some(code) => code,
                None => codes
                    .next()
                    .unwrap_or(ResponseError::UnknownServerError.code()),
            };
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        },
        |t, partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        },
    );
    req.respond(&TxnOffsetCommitResponse::default().with_topics(topics))
}

/// The offsets of a transaction coordinated here: verified with it (the transaction is
/// open, the group's partition in it, the producer current) under the group's guard.
async fn commit_verified(
    ctx: &Ctx,
    commit: CommitRequest,
    txn_id: &str,
    producer: (i64, i16),
    producer_fenced: bool,
) -> Vec<i16> {
    let count = commit.offsets.len();
    let group = commit.group_id.clone();
    match ctx.groups.begin_txn_commit(&group, producer.0).await {
        Err(e) => vec![e.code(); count],
        Ok(guard) => match ctx
            .txns
            .verify_offsets(txn_id, producer.0, producer.1, &group)
            .await
        {
            Ok(()) => ctx.groups.txn_commit(commit, producer, Some(guard)).await,
            Err(e) => vec![e.code(producer_fenced); count],
        },
    }
}
