//! What ShareFetch and ShareAcknowledge do to one share partition at its leader:
//! acknowledge, and acquire records from the log for a member.
//!
//! A fetch reads whole batches from where the share partition's next deliverable
//! record is, up to the high watermark, and acquires the records in them that no one
//! holds; the response carries the batches holding acquired records and the acquired
//! offset ranges (the client drops the batches' other records). Control batches hold
//! no record a consumer sees: they are never acquired.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tidelog_records::BatchHeader;
use uuid::Uuid;

use super::partition::{AckType, Acquired, SharePartition};
use super::state::records::{delivery_complete_count, ShareSnapshot};
use super::state::ShareStateError;
use super::{group_share_config, AutoOffsetReset, ShareEntry, ShareKey};
use crate::context::Ctx;
use crate::replica::{Partition, Role};

/// How often, and how far apart, a share partition's start asks a share coordinator
/// that is loading or moving (3 s in all, within a fetch's usual wait).
const STATE_READ_ATTEMPTS: usize = 15;
const STATE_READ_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// One acknowledgement batch as the wire carries it (ShareFetch and ShareAcknowledge
/// have the same fields in two types).
pub(crate) struct AckBatch {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) types: Vec<i8>,
}

impl AckBatch {
    pub(crate) fn new(first: i64, last: i64, types: &[i8]) -> AckBatch {
        AckBatch {
            first,
            last,
            types: types.to_vec(),
        }
    }
}

/// What one partition's fetch produced.
pub(crate) struct Fetched {
    pub(crate) records: Bytes,
    pub(crate) acquired: Vec<Acquired>,
}

/// The led partition `topic_id`/`partition` and its share partition for `group`: a
/// share partition new to this leadership starts from the share coordinator's state,
/// else (none stored) from `share.auto.offset.reset`, which is then stored.
async fn share_partition(
    ctx: &Ctx,
    group: &str,
    topic_id: Uuid,
    partition: i32,
) -> Result<(Arc<Partition>, Arc<ShareEntry>), ResponseError> {
    let image = ctx.metadata.image();
    let topic = image
        .topic_by_id(&topic_id)
        .map(|t| t.name.clone())
        .ok_or(ResponseError::UnknownTopicId)?;
    let p = ctx
        .replicas
        .get(&topic, partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if p.role() != Role::Leader {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let config = group_share_config(&ctx.groups.config.group_configs, group);
    let key = (group.to_string(), topic_id, partition);
    let epoch = p.leader_epoch();
    if let Some(entry) = ctx.shares.current(&key, epoch) {
        entry.lock().set_limits(config.limits);
        return Ok((p, entry));
    }
    // A share partition's start waits (bounded) for a share coordinator that is still
    // loading or moving, as Kafka's waits for its persister, rather than failing the
    // fetch: librdkafka's ShareConsumer surfaces such a partition error to the app.
    let mut stored = Err(ShareStateError::Unreachable {
        node: -1,
        why: "not asked".into(),
    });
    for _ in 0..STATE_READ_ATTEMPTS {
        stored = match ctx.share_state.ensure_topic(ctx).await {
            Ok(()) => ctx.share_state.read(key.clone(), epoch).await,
            Err(e) => Err(e),
        };
        match &stored {
            Err(e) if state_error(e) == ResponseError::LeaderNotAvailable => {
                tokio::time::sleep(STATE_READ_BACKOFF).await;
            }
            _ => break,
        }
    }
    let stored = match stored {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(group, %topic_id, partition, error = %e, "share state not readable yet");
            return Err(state_error(&e));
        }
    };
    let offsets = p.offsets().map_err(|_| ResponseError::UnknownServerError)?;
    // by_duration: the first record no older than the duration, found before the
    // share partition is made (the lookup reads the time index).
    let by_duration = match config.auto_offset_reset {
        AutoOffsetReset::ByDuration(age) if stored.is_none() => {
            let since = crate::context::now_ms()
                .saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            p.with_log(|log| log.offset_for_timestamp(since))
                .ok()
                .flatten()
                .map(|(offset, _)| offset.min(offsets.high_watermark))
        }
        _ => None,
    };
    let restored = stored.is_some();
    let state_epoch = stored.as_ref().map_or(0, |s| s.state_epoch);
    let (entry, created) = ctx
        .shares
        .entry(&key, epoch, state_epoch, || match stored {
            Some(s) => {
                tracing::info!(group, %topic_id, partition, start = s.start_offset, "share partition restored");
                SharePartition::from_snapshot(s.start_offset, &s.batches, config.limits)
            }
            None => {
                let start = match config.auto_offset_reset {
                    AutoOffsetReset::Earliest => offsets.log_start,
                    AutoOffsetReset::Latest => offsets.high_watermark,
                    AutoOffsetReset::ByDuration(_) => by_duration.unwrap_or(offsets.high_watermark),
                };
                tracing::info!(group, %topic_id, partition, start, "share partition initialised");
                SharePartition::new(start, config.limits)
            }
        })
        .ok_or(ResponseError::UnknownServerError)?;
    if created && !restored {
        persist(ctx, &key, &entry).await?;
    }
    Ok((p, entry))
}

/// What a share fetch answers when the state cannot be read or written, as Kafka's
/// share partition maps its persister's errors: a coordinator that is loading, moving
/// or missing is LEADER_NOT_AVAILABLE (retriable: clients fetch again), a leader a newer
/// one has fenced is NOT_LEADER_OR_FOLLOWER.
fn state_error(e: &ShareStateError) -> ResponseError {
    if let ShareStateError::FencedLeaderEpoch(_) | ShareStateError::FencedStateEpoch(_) = e {
        return ResponseError::NotLeaderOrFollower;
    }
    match ResponseError::try_from_code(e.code()) {
        Some(
            ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NotCoordinator,
        ) => ResponseError::LeaderNotAvailable,
        Some(other) => other,
        None => ResponseError::UnknownServerError,
    }
}

/// Writes the share partition's state to the share coordinator (here or on another
/// node), answered once it is replicated.
pub(crate) async fn persist(
    ctx: &Ctx,
    key: &ShareKey,
    entry: &Arc<ShareEntry>,
) -> Result<(), ResponseError> {
    let _turn = entry.writes.lock().await;
    let (start_offset, batches) = entry.lock().snapshot();
    let snapshot = ShareSnapshot {
        snapshot_epoch: 0,
        state_epoch: entry.state_epoch,
        leader_epoch: entry.leader_epoch,
        start_offset,
        delivery_complete_count: delivery_complete_count(&batches),
        batches,
    };
    match ctx.share_state.write(key.clone(), snapshot).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(group = %key.0, topic_id = %key.1, partition = key.2, error = %e, "share state write failed");
            if let ShareStateError::FencedStateEpoch(_) = e {
                ctx.shares.forget(key, entry);
            }
            Err(state_error(&e))
        }
    }
}

/// A new share session of a member: a share partition kept here whose stored state
/// was reset (AlterShareGroupOffsets, a newer state epoch) or deleted
/// (DeleteShareGroupOffsets) while the group was empty is dropped, so it starts again
/// from the store. Offsets change only while a group is empty, so a member's first
/// fetch is where a leader can meet a change.
pub(crate) async fn revalidate(ctx: &Ctx, group: &str, topic_id: Uuid, partition: i32) {
    let key = (group.to_string(), topic_id, partition);
    let Some(entry) = ctx.shares.existing(&key) else {
        return;
    };
    let stale = match ctx.share_state.summary(key.clone()).await {
        Ok(Some(stored)) => stored.state_epoch > entry.state_epoch,
        Ok(None) => true,
        // Unknown: the write of the next acknowledgement is fenced if it is stale.
        Err(_) => false,
    };
    if stale {
        tracing::info!(group, %topic_id, partition, "share partition state changed while the group was empty; starting again from the store");
        ctx.shares.forget(&key, &entry);
    }
}

/// Applies a member's acknowledgements for one partition; the partition's error, if any.
/// RENEW is a type of version 2 (KIP-1222): `renew_in_version` says the request is
/// one, else a batch holding it is INVALID_REQUEST, as an unknown type is. A group
/// whose `share.renew.acknowledge.enable` is false refuses it with
/// INVALID_RECORD_STATE, as Kafka does.
pub(crate) async fn acknowledge(
    ctx: &Ctx,
    (group, member): (&str, &str),
    (topic_id, partition): (Uuid, i32),
    batches: &[AckBatch],
    renew_in_version: bool,
) -> Option<ResponseError> {
    let (p, entry) = match share_partition(ctx, group, topic_id, partition).await {
        Ok(x) => x,
        Err(e) => return Some(e),
    };
    let renew_enabled = ctx
        .groups
        .config
        .group_configs
        .share_renew_acknowledge_enable(group);
    let mut result = None;
    let mut freed = false;
    {
        let now = Instant::now();
        let mut sp = entry.lock();
        sp.expire_locks(now);
        for b in batches {
            let Some(types) = b
                .types
                .iter()
                .map(|t| {
                    AckType::from_code(*t).filter(|k| renew_in_version || *k != AckType::Renew)
                })
                .collect::<Option<Vec<_>>>()
            else {
                result = Some(ResponseError::InvalidRequest);
                continue;
            };
            if !renew_enabled && types.contains(&AckType::Renew) {
                result = Some(ResponseError::InvalidRecordState);
                continue;
            }
            freed |= types.contains(&AckType::Release);
            if let Err(e) = sp.acknowledge(member, b.first, b.last, &types, now) {
                tracing::debug!(group, member, %topic_id, partition, error = %e, "acknowledgement refused");
                result = Some(match e {
                    super::partition::AckError::Malformed(..) => ResponseError::InvalidRequest,
                    super::partition::AckError::NotAcquired(_) => ResponseError::InvalidRecordState,
                });
            }
        }
        if let Ok(offsets) = p.offsets() {
            observe(ctx, group, &p, &mut sp, offsets.high_watermark);
        }
    }
    if freed {
        entry.wake();
    }
    // Durable before it is answered: an accepted record is not delivered again by a
    // later leader, and a rejected one is stored as ARCHIVING until its dead-letter
    // copy is written (KIP-1191), which starts once it is stored.
    let key = (group.to_string(), topic_id, partition);
    if let Err(e) = persist(ctx, &key, &entry).await {
        return Some(e);
    }
    ctx.shares.dispatch_dead_letters(&key, &entry);
    result
}

/// Acquires up to `max_records` records (of at most about `max_bytes`) for `member`.
/// Parks `notify` on the log and the share partition so a waiting fetch wakes when
/// records arrive or come back.
pub(crate) async fn acquire(
    ctx: &Ctx,
    (group, member): (&str, &str),
    (topic_id, partition): (Uuid, i32),
    max_records: usize,
    max_bytes: usize,
    notify: &Arc<tokio::sync::Notify>,
) -> Result<Fetched, ResponseError> {
    let (p, entry) = share_partition(ctx, group, topic_id, partition).await?;
    p.park(notify);
    entry.park(notify);
    let now = Instant::now();
    entry.lock().expire_locks(now);
    // Records whose locks ran out at the delivery limit, or whose dead-letter write
    // is due for another try (KIP-1191).
    ctx.shares
        .dispatch_dead_letters(&(group.to_string(), topic_id, partition), &entry);
    let mut sp = entry.lock();
    let offset = sp.next_fetch_offset();
    let read = p.read(offset, max_bytes.max(1), false).map_err(|e| {
        ResponseError::try_from_code(e.code()).unwrap_or(ResponseError::UnknownServerError)
    })?;
    sp.log_start_moved(read.log_start_offset);
    let Some(slice) = read.slice else {
        observe(ctx, group, &p, &mut sp, read.high_watermark);
        return Ok(Fetched {
            records: Bytes::new(),
            acquired: Vec::new(),
        });
    };
    // A page-cache read of what was just written, like a fetch's sendfile.
    let bytes = slice
        .read_to_vec()
        .map_err(|_| ResponseError::KafkaStorageError)?;
    let batches = batch_ranges(&bytes);
    let ranges: Vec<(i64, i64)> = batches
        .iter()
        .filter(|b| !b.control)
        .map(|b| (b.first, b.last))
        .collect();
    let acquired = sp.acquire(member, &ranges, max_records, now);
    observe(ctx, group, &p, &mut sp, read.high_watermark);
    drop(sp);
    let mut records = Vec::new();
    for b in &batches {
        if acquired
            .iter()
            .any(|a| a.first <= b.last && b.first <= a.last)
        {
            records.extend_from_slice(&bytes[b.start..b.end]);
        }
    }
    Ok(Fetched {
        records: Bytes::from(records),
        acquired,
    })
}

/// The share partition's metrics from its state now, the log's `high_watermark` and
/// what happened to it since the last time (KIP-932's in-flight, acquired and lag; the
/// redelivered and archived counts).
fn observe(ctx: &Ctx, group: &str, p: &Partition, sp: &mut SharePartition, high_watermark: i64) {
    ctx.metrics.shares.observe(
        (group, &p.topic, p.index),
        sp.start_offset(),
        high_watermark,
        sp.gauges(),
        sp.take_transitions(),
    );
}

/// The earliest acquisition lock deadline among `partitions` of `group`.
pub(crate) fn next_lock_deadline(
    ctx: &Ctx,
    group: &str,
    partitions: &[(Uuid, i32)],
) -> Option<Instant> {
    partitions
        .iter()
        .filter_map(|(t, p)| ctx.shares.existing(&(group.to_string(), *t, *p)))
        .filter_map(|e| e.lock().next_lock_deadline())
        .min()
}

struct BatchSpan {
    first: i64,
    last: i64,
    control: bool,
    start: usize,
    end: usize,
}

/// The batches of `bytes` (whole batches, as a log read returns them).
fn batch_ranges(bytes: &[u8]) -> Vec<BatchSpan> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let Ok(header) = BatchHeader::new(&bytes[pos..]) else {
            break;
        };
        let Some(size) = header.total_size() else {
            break;
        };
        let end = pos.saturating_add(size);
        if end > bytes.len() {
            break;
        }
        out.push(BatchSpan {
            first: header.base_offset(),
            last: header.last_offset(),
            control: header.is_control(),
            start: pos,
            end,
        });
        pos = end;
    }
    out
}
