//! ShareFetch (KIP-932): a share-group member's fetch from the partitions of its share
//! session at this leader, with the acknowledgements of what it fetched before
//! piggy-backed. Records come back acquired for the member under an acquisition lock;
//! with nothing to acquire the fetch waits up to `max_wait_ms` for records to arrive,
//! to be released, or for a lock to run out.
//!
//! Version 2 (Kafka 4.2) adds the RENEW acknowledgement (KIP-1222) and the acquire mode
//! (KIP-1206). A fetch that carries renewals (`is_renew_ack`) only acknowledges: it
//! acquires nothing and must ask for nothing (its wait and byte and record limits are
//! 0). Both acquire modes are honoured as they stand: records are acquired one by one
//! up to `max_records`, never past it, which is what record-limit asks and what
//! batch-optimized allows.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_request::ShareFetchRequest;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchResponse,
    ShareFetchableTopicResponse,
};
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::{later_response, Request};
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;
use crate::share::fetch::{self, AckBatch};
use crate::share::group_share_config;
use crate::share::session::SessionStep;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };

/// KIP-1206's acquire modes (`ShareAcquireMode`): batch-optimized and record-limit.
const ACQUIRE_MODES: std::ops::RangeInclusive<i8> = 0..=1;

/// The longest a share fetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(60);
/// Records one fetch acquires when the client does not say (Kafka's max.poll.records).
const DEFAULT_MAX_RECORDS: usize = 500;

/// One partition's part of the answer.
#[derive(Default)]
struct Answer {
    error: Option<ResponseError>,
    ack_error: Option<ResponseError>,
    acked: bool,
    records: bytes::Bytes,
    acquired: Vec<AcquiredRecords>,
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ShareFetchRequest = req.decode()?;
    let refuse = |code: ResponseError, message: &str| {
        ShareFetchResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(message)))
    };
    let (Some(group), Some(member)) = (
        request.group_id.as_ref().map(|g| g.0.to_string()),
        request.member_id.as_ref().map(|m| m.to_string()),
    ) else {
        return req.respond(&refuse(
            ResponseError::InvalidRequest,
            "GroupId and MemberId are required.",
        ));
    };
    if group.is_empty() || member.is_empty() {
        return req.respond(&refuse(
            ResponseError::InvalidRequest,
            "GroupId and MemberId can't be empty.",
        ));
    }
    if !ACQUIRE_MODES.contains(&request.share_acquire_mode) {
        return req.respond(&refuse(
            ResponseError::InvalidRequest,
            "ShareAcquireMode must be 0 (batch_optimized) or 1 (record_limit).",
        ));
    }
    let renew_only = request.is_renew_ack;
    if renew_only
        && (
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            request.max_records,
        ) != (0, 0, 0, 0)
    {
        return req.respond(&refuse(
            ResponseError::InvalidRequest,
            "A ShareFetch renewing acquisition locks must not fetch: MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0.",
        ));
    }
    let renew_in_version = req.version() >= 2;
    let access = req.access(ctx);
    if let Some(code) = access.refused(AclOperation::Read, ResourceType::Group, &group) {
        return req.respond(&ShareFetchResponse::default().with_error_code(code));
    }
    let epoch = request.share_session_epoch;
    let has_acks = request
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| !p.acknowledgement_batches.is_empty());
    if epoch == 0 && has_acks {
        return req.respond(&refuse(
            ResponseError::InvalidRequest,
            "Acknowledgements are not allowed when opening a share session.",
        ));
    }
    let image = ctx.metadata.image();
    let mut answers: std::collections::BTreeMap<(Uuid, i32), Answer> = Default::default();
    let mut add = Vec::new();
    for t in &request.topics {
        let denied = image
            .topic_by_id(&t.topic_id)
            .is_some_and(|topic| !access.topic(AclOperation::Read, &topic.name));
        for p in &t.partitions {
            if denied {
                answers
                    .entry((t.topic_id, p.partition_index))
                    .or_default()
                    .error = Some(ResponseError::TopicAuthorizationFailed);
            } else {
                add.push((t.topic_id, p.partition_index));
            }
        }
    }
    let forget: Vec<(Uuid, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let key = (group.clone(), member.clone());
    let mut replaced = Vec::new();
    let step = ctx.shares.sessions.step(
        &key,
        epoch,
        &add,
        &forget,
        std::time::Instant::now(),
        &mut replaced,
    );
    ctx.shares.release(&group, &member, &replaced);
    if epoch == 0 {
        for (topic_id, partition) in &add {
            fetch::revalidate(ctx, &group, *topic_id, *partition).await;
        }
    }
    let (fetch_from, closed) = match step {
        Ok(SessionStep::Open(partitions)) => (Some(partitions), None),
        Ok(SessionStep::Closed(partitions)) => (None, Some(partitions)),
        Err(e) => return req.respond(&ShareFetchResponse::default().with_error_code(e.code())),
    };
    // Acknowledgements first: what they release may be fetched right away.
    for t in &request.topics {
        for p in &t.partitions {
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            let batches: Vec<AckBatch> = p
                .acknowledgement_batches
                .iter()
                .map(|b| AckBatch::new(b.first_offset, b.last_offset, &b.acknowledge_types))
                .collect();
            let a = answers.entry((t.topic_id, p.partition_index)).or_default();
            a.acked = true;
            if a.error.is_none() {
                a.ack_error = fetch::acknowledge(
                    ctx,
                    (&group, &member),
                    (t.topic_id, p.partition_index),
                    &batches,
                    renew_in_version,
                )
                .await;
            }
        }
    }
    if let Some(partitions) = closed {
        // Closing the session: what the member still holds goes back to the others.
        ctx.shares.release(&group, &member, &partitions);
    }
    let lock_ms = lock_timeout_ms(ctx, &group);
    let header = req.header.clone();
    let metrics = Arc::clone(&req.metrics);
    let Some(partitions) = fetch_from.filter(|_| !renew_only) else {
        return Ok(later_response(
            &metrics,
            &header,
            &response(answers, lock_ms),
        ));
    };
    let wait =
        Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let max_records = usize::try_from(request.max_records)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_RECORDS);
    let max_bytes = usize::try_from(request.max_bytes)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(usize::MAX);
    let ctx = Arc::clone(ctx);
    Ok(Reply::Later(Box::pin(async move {
        let mut shutdown = ctx.shutdown.clone();
        loop {
            let notify = Arc::new(Notify::new());
            let mut records_left = max_records;
            let mut bytes_left = max_bytes;
            let mut got = false;
            for (topic_id, partition) in &partitions {
                if records_left == 0 || bytes_left == 0 {
                    break;
                }
                let a = answers.entry((*topic_id, *partition)).or_default();
                if a.error.is_some() {
                    continue;
                }
                match fetch::acquire(
                    &ctx,
                    (&group, &member),
                    (*topic_id, *partition),
                    records_left,
                    bytes_left,
                    &notify,
                )
                .await
                {
                    Ok(f) if !f.acquired.is_empty() => {
                        got = true;
                        let n: i64 = f.acquired.iter().map(|r| r.last - r.first + 1).sum();
                        records_left = records_left.saturating_sub(usize::try_from(n).unwrap_or(0));
                        bytes_left = bytes_left.saturating_sub(f.records.len());
                        a.records = f.records;
                        a.acquired = f
                            .acquired
                            .iter()
                            .map(|r| {
                                AcquiredRecords::default()
                                    .with_first_offset(r.first)
                                    .with_last_offset(r.last)
                                    .with_delivery_count(r.delivery_count)
                            })
                            .collect();
                    }
                    Ok(_) => {}
                    Err(e) => {
                        got = true;
                        a.error = Some(e);
                    }
                }
            }
            let now = Instant::now();
            if got || now >= deadline || *shutdown.borrow() {
                return later_response(&ctx.metrics, &header, &response(answers, lock_ms));
            }
            let wake = fetch::next_lock_deadline(&ctx, &group, &partitions)
                .map(Instant::from_std)
                .map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                _ = notify.notified() => {}
                _ = tokio::time::sleep_until(wake) => {}
                _ = shutdown.changed() => {}
            }
        }
    })))
}

/// The group's acquisition lock duration (`share.record.lock.duration.ms`), as the
/// responses carry it.
pub(super) fn lock_timeout_ms(ctx: &Ctx, group: &str) -> i32 {
    let limits = group_share_config(&ctx.groups.config.group_configs, group).limits;
    i32::try_from(limits.lock_duration.as_millis()).unwrap_or(i32::MAX)
}

fn response(
    answers: std::collections::BTreeMap<(Uuid, i32), Answer>,
    lock_ms: i32,
) -> ShareFetchResponse {
    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    for ((topic_id, partition), a) in answers {
        if a.error.is_none() && !a.acked && a.acquired.is_empty() {
            continue;
        }
        let data = PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(a.error.map_or(0, |e| e.code()))
            .with_acknowledge_error_code(a.ack_error.map_or(0, |e| e.code()))
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(-1)
                    .with_leader_epoch(-1),
            )
            .with_records(Some(a.records))
            .with_acquired_records(a.acquired);
        match topics.last_mut() {
            Some(t) if t.topic_id == topic_id => t.partitions.push(data),
            _ => topics.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(topics)
}
