//! Completing a decided transaction on its partitions: a COMMIT or ABORT control batch
//! (Kafka's transaction marker: key `version i16 = 0, type i16` with 0 = ABORT and
//! 1 = COMMIT, value `version i16 = 0, coordinator_epoch i32`) appended to each
//! partition, and on commit the transaction's consumer offsets made committed.
//!
//! On a cluster each group's `__consumer_offsets` partition gets a marker too: it decides
//! the offsets the group's coordinator keeps for the transaction (`foreign`), and a
//! reload of that partition finds the decision after them.
//!
//! Partitions hosted here are written directly; WriteTxnMarkers uses `write_marker`
//! when another coordinator asks. A marker counts as written only once replicated (a
//! marker lost in a leader change would leave its transaction open on the partition):
//! `write_marker` waits for that, and the coordinator's own pass, which runs under its
//! lock, notes the appended marker and looks again on its next pass. A partition whose
//! topic was deleted needs no marker. Anything else that fails is left for the next
//! retry.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use tidelog_storage::BatchBuilder;

use super::remote::{MarkerKey, OffsetsDelivery, OffsetsKey};
use super::state::{PendingOffset, TxnMeta};
use crate::context::{now_ms, BrokerContext};
use crate::group::{CommitRequest, OFFSETS_TOPIC};
use crate::internal_topic::{await_replicated, partition_for, replicated_now, Written as Appended};

/// What of the current decision is already written (memory only: after a restart it
/// is written again, and a repeated marker changes nothing).
#[derive(Debug, Default)]
pub(crate) struct Written {
    partitions: BTreeSet<(String, i32)>,
    groups: BTreeSet<String>,
    /// Groups coordinated elsewhere whose offsets, kept here, were handed over, and
    /// the broker they went to.
    offsets_handed: BTreeMap<String, i32>,
    /// Markers appended here and not yet replicated.
    replicating: BTreeMap<(String, i32), Appended>,
    /// Whether the last pass left markers to another broker (`remote`).
    remote_pending: bool,
}

impl Written {
    /// Whether the decision only waits for markers in flight: appended here and not yet
    /// replicated, or asked of another broker. Worth a look on every tick (looking
    /// writes nothing), rather than once per timeout check as a failed write is.
    pub(super) fn in_flight(&self) -> bool {
        !self.replicating.is_empty() || self.remote_pending
    }
}

/// Where a marker appended earlier stands: replicated (`Some(true)`), still in flight
/// (`None`), or lost to a leader change or refused (`Some(false)`: write it again).
fn marker_replicated(ctx: &BrokerContext, topic: &str, appended: Appended) -> Option<bool> {
    let Some(p) = ctx.replicas.get(topic, appended.partition) else {
        return Some(false);
    };
    replicated_now(&p, appended).map(|outcome| outcome.is_ok())
}

/// Writes every marker (and, on commit, every group's offsets) not yet written.
/// Returns true when nothing is left.
pub(super) fn write_all(
    ctx: &BrokerContext,
    transactional_id: &str,
    meta: &TxnMeta,
    commit: bool,
    coordinator_epoch: i32,
    done: &mut Written,
) -> bool {
    let mut complete = true;
    done.remote_pending = false;
    let groups = group_partitions(ctx, meta);
    // Offsets kept here for a group now coordinated elsewhere (the group was coordinated
    // here when they came) go to its coordinator first: its marker decides only what it
    // holds.
    let mut held_back = BTreeSet::new();
    for (group, &(partition, leader)) in groups.iter().filter(|_| commit) {
        if leader < 0 || leader == ctx.node_id() || done.offsets_handed.get(group) == Some(&leader)
        {
            continue;
        }
        let offsets = group_offsets(meta, group);
        if offsets.is_empty() {
            continue;
        }
        let key = OffsetsKey {
            group: group.clone(),
            partition,
            producer_id: meta.producer_id,
            epoch: meta.epoch,
        };
        let delivery = OffsetsDelivery {
            transactional_id: transactional_id.to_string(),
            offsets,
        };
        if ctx
            .txns
            .remote_lock()
            .offsets_delivered_or_want(key, delivery)
        {
            // Once per coordinator: offsets handed over again after the marker would
            // wait there for a marker that never comes.
            done.offsets_handed.insert(group.clone(), leader);
        } else {
            done.remote_pending = true;
            complete = false;
            held_back.insert(partition);
        }
    }
    // A marker for every partition the transaction wrote and, on a cluster, for each
    // group's offsets partition: there it decides the offsets the group's coordinator
    // keeps for the transaction (`foreign`), on this node or another, as in Kafka.
    let targets: BTreeSet<(String, i32)> = meta
        .partitions
        .iter()
        .cloned()
        .chain(
            groups
                .values()
                .filter(|(partition, _)| !held_back.contains(partition))
                .map(|(partition, _)| (OFFSETS_TOPIC.to_string(), *partition)),
        )
        .collect();
    for (topic, partition) in &targets {
        let key = (topic.clone(), *partition);
        if done.partitions.contains(&key) {
            continue;
        }
        if let Some(appended) = done.replicating.get(&key).copied() {
            match marker_replicated(ctx, topic, appended) {
                Some(true) => {
                    done.replicating.remove(&key);
                    done.partitions.insert(key);
                    continue;
                }
                None => {
                    complete = false;
                    continue;
                }
                Some(false) => {
                    done.replicating.remove(&key);
                }
            }
        }
        let marker = MarkerKey {
            topic: topic.clone(),
            partition: *partition,
            producer_id: meta.producer_id,
            epoch: meta.epoch,
            commit,
            coordinator_epoch,
        };
        match append_marker(ctx, &marker) {
            Ok(None) => {
                done.partitions.insert(key);
            }
            Ok(Some(appended)) => match marker_replicated(ctx, topic, appended) {
                Some(true) => {
                    done.partitions.insert(key);
                }
                _ => {
                    done.replicating.insert(key, appended);
                    complete = false;
                }
            },
            // Led by another broker of the cluster: it writes the marker when asked.
            Err(code) if code == ResponseError::NotLeaderOrFollower.code() => {
                if ctx.txns.remote_lock().take_or_want(marker) {
                    done.partitions.insert(key);
                } else {
                    done.remote_pending = true;
                    complete = false;
                }
            }
            Err(code) => {
                tracing::warn!(topic = %topic, partition, producer_id = meta.producer_id, code, "writing a transaction marker failed; will retry");
                complete = false;
            }
        }
    }
    if !commit {
        return complete;
    }
    for (group, committer) in &meta.groups {
        let elsewhere = groups
            .get(group)
            .is_some_and(|(_, leader)| *leader >= 0 && *leader != ctx.node_id());
        if done.groups.contains(group) || elsewhere {
            continue;
        }
        let offsets: Vec<(String, i32, i64, i32, Option<String>)> = group_offsets(meta, group)
            .into_iter()
            .map(|(topic, p, o)| (topic, p, o.offset, o.leader_epoch, o.metadata))
            .collect();
        if offsets.is_empty() {
            done.groups.insert(group.clone());
            continue;
        }
        let codes = ctx.groups.commit_materialized(
            ctx,
            CommitRequest {
                group_id: group.clone(),
                generation: committer.generation,
                member_id: committer.member_id.clone(),
                instance_id: committer.instance_id.clone(),
                offsets,
            },
        );
        let retriable = [
            ResponseError::CoordinatorLoadInProgress.code(),
            ResponseError::CoordinatorNotAvailable.code(),
            ResponseError::NotCoordinator.code(),
            ResponseError::KafkaStorageError.code(),
        ];
        if codes.iter().any(|c| retriable.contains(c)) {
            tracing::warn!(group = %group, ?codes, "committing transactional offsets failed; will retry");
            complete = false;
            continue;
        }
        if codes.iter().any(|c| *c != 0) {
            // The group moved on (new generation, member gone): Kafka would still make
            // these offsets visible; the group coordinator here refuses them, so they
            // are dropped and the group re-reads from its last committed offsets.
            tracing::error!(group = %group, ?codes, "transactional offsets refused by the group coordinator; dropped");
        }
        done.groups.insert(group.clone());
    }
    complete
}

/// The transaction's offsets for `group`, as (topic, partition, offset).
fn group_offsets(meta: &TxnMeta, group: &str) -> Vec<(String, i32, PendingOffset)> {
    meta.offsets
        .iter()
        .filter(|((g, _, _), _)| g == group)
        .map(|((_, topic, p), o)| (topic.clone(), *p, o.clone()))
        .collect()
}

/// Each of the transaction's groups with its `__consumer_offsets` partition and that
/// partition's leader (-1: none).
fn group_partitions(ctx: &BrokerContext, meta: &TxnMeta) -> BTreeMap<String, (i32, i32)> {
    let image = ctx.metadata.image();
    let Some(topic) = image.topic(OFFSETS_TOPIC) else {
        return BTreeMap::new();
    };
    meta.groups
        .keys()
        .map(|group| {
            let partition = partition_for(group, topic.partition_count());
            let leader = topic.partitions.get(&partition).map_or(-1, |p| p.leader);
            (group.clone(), (partition, leader))
        })
        .collect()
}

/// Appends one transaction marker to a partition led here and answers once it is
/// replicated (WriteTxnMarkers from another node's coordinator). Blocks its thread
/// while waiting: call with no lock held.
pub(crate) fn write_marker(ctx: &BrokerContext, marker: &MarkerKey) -> Result<(), i16> {
    let Some(appended) = append_marker(ctx, marker)? else {
        return Ok(());
    };
    let p = ctx
        .replicas
        .get(&marker.topic, marker.partition)
        .ok_or(ResponseError::NotLeaderOrFollower.code())?;
    await_replicated(&p, appended)
}

/// Appends one transaction marker to a partition led here; where it landed, or `None`
/// when the topic is gone (nothing left to mark).
fn append_marker(ctx: &BrokerContext, marker: &MarkerKey) -> Result<Option<Appended>, i16> {
    let image = ctx.metadata.image();
    let Some(leader) = image
        .topic(&marker.topic)
        .and_then(|t| t.partitions.get(&marker.partition))
        .map(|p| p.leader)
    else {
        return Ok(None);
    };
    if leader != ctx.node_id() {
        return Err(ResponseError::NotLeaderOrFollower.code());
    }
    let p = ctx
        .replicas
        .get(&marker.topic, marker.partition)
        .ok_or(ResponseError::NotLeaderOrFollower.code())?;
    if marker.topic == OFFSETS_TOPIC {
        // Decide the transactional offsets kept here before the marker is written, so
        // a failure leaves both for the retried marker.
        super::foreign::decide(ctx, marker.partition, marker.producer_id, marker.commit)?;
    }
    let now = now_ms();
    let mut batch = BatchBuilder::control_marker(
        marker.producer_id,
        marker.epoch,
        marker.commit,
        marker.coordinator_epoch,
        now,
    )
    .build()
    .ok_or(ResponseError::UnknownServerError.code())?;
    p.append_control(&mut batch, now)
        .map(|appended| Some(Appended::of(marker.partition, &appended)))
        .map_err(|e| e.code())
}
