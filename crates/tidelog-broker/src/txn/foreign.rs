//! Transactional offsets for a group coordinated here while the transaction is
//! coordinated by another node (a cluster). The producer sends TxnOffsetCommit to the
//! group's coordinator, as Kafka clients do; that node keeps the offsets here, and the
//! transaction's coordinator later sends a COMMIT or ABORT marker for the group's
//! `__consumer_offsets` partition (WriteTxnMarkers), which makes them committed offsets
//! or drops them: Kafka's own division of the work between the two coordinators.
//!
//! They are also written to the group's `__consumer_offsets` partition as a
//! transactional batch of the producer (`GroupCoordinator::write_transactional_offsets`),
//! and the marker follows them there, so a node that loads the partition (a restart, or
//! the group's coordinator moving) finds the undecided ones again (`group::load`) and
//! restores them here.

use std::collections::BTreeMap;

use super::state::{Committer, PendingOffset};
use crate::context::BrokerContext;
use crate::group::{CommitRequest, PendingByProducer, OFFSETS_TOPIC};
use crate::internal_topic::partition_for;

/// Producers with offsets kept at once; beyond it the oldest producer's are dropped.
const MAX_PRODUCERS: usize = 10_000;

#[derive(Debug)]
struct Pending {
    committer: Committer,
    offsets: BTreeMap<(String, i32), PendingOffset>,
}

/// Per producer id and group, the offsets its open transaction committed here.
#[derive(Debug, Default)]
pub(crate) struct ForeignOffsets {
    by_producer: BTreeMap<i64, BTreeMap<String, Pending>>,
}

impl ForeignOffsets {
    pub(crate) fn add(
        &mut self,
        producer_id: i64,
        group: &str,
        committer: Committer,
        offsets: &[(String, i32, PendingOffset)],
    ) {
        if !self.by_producer.contains_key(&producer_id) && self.by_producer.len() >= MAX_PRODUCERS {
            self.by_producer.pop_first();
        }
        let pending = self
            .by_producer
            .entry(producer_id)
            .or_default()
            .entry(group.to_string())
            .or_insert_with(|| Pending {
                committer: committer.clone(),
                offsets: BTreeMap::new(),
            });
        pending.committer = committer;
        for (topic, partition, offset) in offsets {
            pending
                .offsets
                .insert((topic.clone(), *partition), offset.clone());
        }
    }

    /// Drops the offsets of every group stored in `partition` of `__consumer_offsets`
    /// (of `partition_count`).
    fn forget_partition(&mut self, partition: i32, partition_count: i32) {
        for groups in self.by_producer.values_mut() {
            groups.retain(|group, _| partition_for(group, partition_count) != partition);
        }
        self.by_producer.retain(|_, groups| !groups.is_empty());
    }

    /// Whether an undecided transaction holds an offset for this group partition.
    pub(crate) fn holds(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.by_producer.values().any(|groups| {
            groups
                .get(group)
                .is_some_and(|p| p.offsets.contains_key(&key))
        })
    }

    /// Takes the offsets of `producer_id` for groups stored in `partition` of
    /// `__consumer_offsets` (of `partition_count`).
    fn take(
        &mut self,
        producer_id: i64,
        partition: i32,
        partition_count: i32,
    ) -> Vec<(String, Pending)> {
        let Some(groups) = self.by_producer.get_mut(&producer_id) else {
            return Vec::new();
        };
        let wanted: Vec<String> = groups
            .keys()
            .filter(|g| partition_for(g, partition_count) == partition)
            .cloned()
            .collect();
        let taken = wanted
            .into_iter()
            .filter_map(|g| groups.remove(&g).map(|p| (g, p)))
            .collect();
        if groups.is_empty() {
            self.by_producer.remove(&producer_id);
        }
        taken
    }
}

/// A marker for `partition` of `__consumer_offsets`: on commit the kept offsets of the
/// producer's groups there become committed offsets, on abort they are dropped. An
/// error (the group coordinator cannot write now) keeps them for the retried marker.
pub(crate) fn decide(
    ctx: &BrokerContext,
    partition: i32,
    producer_id: i64,
    commit: bool,
) -> Result<(), i16> {
    let count = ctx
        .metadata
        .image()
        .topic(OFFSETS_TOPIC)
        .map_or(0, |t| t.partition_count());
    let taken = ctx.txns.foreign_lock().take(producer_id, partition, count);
    if !commit {
        return Ok(());
    }
    let mut failed = Vec::new();
    let mut code = 0;
    for (group, pending) in taken {
        let offsets = pending
            .offsets
            .iter()
            .map(|((topic, p), o)| {
                (
                    topic.clone(),
                    *p,
                    o.offset,
                    o.leader_epoch,
                    o.metadata.clone(),
                )
            })
            .collect();
        let codes = ctx.groups.commit_materialized(
            ctx,
            CommitRequest {
                group_id: group.clone(),
                generation: pending.committer.generation,
                member_id: pending.committer.member_id.clone(),
                instance_id: pending.committer.instance_id.clone(),
                offsets,
            },
        );
        if let Some(c) = codes.iter().find(|c| **c != 0) {
            code = *c;
            failed.push((group, pending));
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    let mut kept = ctx.txns.foreign_lock();
    for (group, pending) in failed {
        let offsets: Vec<(String, i32, PendingOffset)> = pending
            .offsets
            .into_iter()
            .map(|((t, p), o)| (t, p, o))
            .collect();
        kept.add(producer_id, &group, pending.committer, &offsets);
    }
    Err(code)
}

fn offsets_partition_count(ctx: &BrokerContext) -> i32 {
    ctx.metadata
        .image()
        .topic(OFFSETS_TOPIC)
        .map_or(0, |t| t.partition_count())
}

impl super::TxnCoordinator {
    /// This node no longer leads `partition` of `__consumer_offsets`: its groups' kept
    /// offsets go (the partition's next leader reloads them from the log).
    pub(crate) fn forget_foreign(&self, ctx: &BrokerContext, partition: i32) {
        let count = offsets_partition_count(ctx);
        self.foreign_lock().forget_partition(partition, count);
    }

    /// `partition` of `__consumer_offsets` was loaded: its groups' kept offsets are
    /// exactly the undecided ones its log holds.
    pub(crate) fn restore_foreign(
        &self,
        ctx: &BrokerContext,
        partition: i32,
        pending: PendingByProducer,
    ) {
        let count = offsets_partition_count(ctx);
        let mut foreign = self.foreign_lock();
        foreign.forget_partition(partition, count);
        for (producer_id, offsets) in pending {
            let mut by_group: BTreeMap<String, Vec<(String, i32, PendingOffset)>> = BTreeMap::new();
            for (group, topic, p, offset) in offsets {
                by_group.entry(group).or_default().push((topic, p, offset));
            }
            for (group, offsets) in by_group {
                foreign.add(producer_id, &group, Committer::default(), &offsets);
            }
        }
    }
}
