//! Leader election planners: what the controller leader writes when brokers come and
//! go (repairs), when a broker shuts down cleanly, and for ElectLeaders / automatic
//! leader rebalancing. All are pure: image in, records out.
//!
//! The rules (as in Kafka without eligible-leader-replicas):
//! - A partition whose leader is not live gets the first live ISR member in replica
//!   order; non-live brokers leave every ISR, but an ISR is never emptied: with no
//!   live member the partition goes offline (leader -1) and its ISR keeps one member
//!   (the old leader), the only replica known to have every acknowledged record.
//! - An offline partition gets its ISR member back as leader as soon as it is live.
//! - With `unclean.leader.election.enable`, an offline partition takes any live
//!   replica instead, with ISR = [it]: records only the old ISR had are lost.

use std::collections::{BTreeMap, BTreeSet};

use super::partition::{
    change_record, complete_if_caught_up, is_live, leader_candidates, unclean_allowed,
    ElectionKind, PartitionError, PartitionResults, TopicPartition, UncleanDefault,
};
use super::Plan;
use crate::image::{MetadataImage, PartitionImage};
use crate::record::MetadataRecord;

/// Brings every partition in line with broker liveness in `image` (plan against an
/// image where the fencing / registration being written is already applied, see
/// [`super::image_with`]). Writes nothing when everything is in order.
pub fn plan_leader_repairs(
    image: &MetadataImage,
    unclean_default: impl Into<UncleanDefault>,
) -> Vec<MetadataRecord> {
    let unclean_default = unclean_default.into();
    let live = |b: i32| is_live(image, b);
    let mut records = Vec::new();
    for topic in image.topics() {
        let unclean = unclean_allowed(image, topic, unclean_default);
        for (&partition, state) in &topic.partitions {
            let next = repaired(state, live, unclean);
            if let Some(record) = change_record(topic.topic_id, partition, state, &next) {
                records.push(record);
            }
        }
    }
    records
}

fn repaired(
    p: &PartitionImage,
    live: impl Fn(i32) -> bool + Copy,
    unclean: bool,
) -> PartitionImage {
    let mut next = p.clone();
    let live_isr: Vec<i32> = p.isr.iter().copied().filter(|b| live(*b)).collect();
    let leader_ok = p.leader >= 0 && live(p.leader) && live_isr.contains(&p.leader);
    if !live_isr.is_empty() {
        if !leader_ok {
            next.leader = leader_candidates(p)
                .find(|r| live_isr.contains(r))
                .unwrap_or(live_isr[0]);
        }
        next.isr = live_isr;
    } else {
        // Nobody in sync is alive: keep the member most likely to hold everything.
        next.isr = if p.isr.contains(&p.leader) {
            vec![p.leader]
        } else {
            p.isr.first().copied().into_iter().collect()
        };
        next.leader = -1;
        if unclean {
            if let Some(replica) = leader_candidates(p).find(|r| live(*r)) {
                tracing::warn!(replica, isr = ?p.isr, "unclean leader election: a replica outside the ISR leads");
                next.leader = replica;
                next.isr = vec![replica];
            }
        }
    }
    complete_if_caught_up(&mut next, live);
    next
}

/// Moves what `broker_id` leads to other live ISR members and takes it out of every
/// ISR that keeps another member. The answer is how many leaderships it still holds
/// (partitions where it is the only live ISR member); the broker asks again until 0.
pub fn plan_controlled_shutdown(image: &MetadataImage, broker_id: i32) -> Plan<u32> {
    let live = |b: i32| b != broker_id && is_live(image, b);
    let mut records = Vec::new();
    let mut still_leading = 0u32;
    for topic in image.topics() {
        for (&partition, state) in &topic.partitions {
            if !state.replicas.contains(&broker_id) {
                continue;
            }
            let mut next = state.clone();
            if state.leader == broker_id {
                match leader_candidates(state).find(|r| live(*r) && state.isr.contains(r)) {
                    Some(new_leader) => next.leader = new_leader,
                    None => {
                        still_leading = still_leading.saturating_add(1);
                        continue;
                    }
                }
            }
            if next.isr.len() > 1 {
                next.isr.retain(|r| *r != broker_id);
            }
            if let Some(record) = change_record(topic.topic_id, partition, state, &next) {
                records.push(record);
            }
        }
    }
    Plan {
        records,
        response: still_leading,
    }
}

/// The partitions automatic rebalancing hands back to their preferred leader (the
/// first replica): those of every broker that leads, of the partitions it is preferred
/// for, a share smaller than `100 - max_imbalance_percent` percent (Kafka's
/// `leader.imbalance.per.broker.percentage` rule). A broker at or under the threshold
/// keeps its imbalance, so leadership does not move for every small difference.
pub fn imbalanced_partitions(
    image: &MetadataImage,
    max_imbalance_percent: u32,
) -> Vec<TopicPartition> {
    let mut by_preferred: BTreeMap<i32, (usize, Vec<TopicPartition>)> = BTreeMap::new();
    for topic in image.topics() {
        for (&partition, state) in &topic.partitions {
            let Some(&preferred) = state.replicas.first() else {
                continue;
            };
            let entry = by_preferred.entry(preferred).or_default();
            entry.0 += 1;
            if state.leader != preferred {
                entry.1.push((topic.name.clone(), partition));
            }
        }
    }
    let limit = u64::from(max_imbalance_percent);
    by_preferred
        .into_values()
        .filter(|(total, elsewhere)| elsewhere.len() as u64 * 100 > *total as u64 * limit)
        .flat_map(|(_, elsewhere)| elsewhere)
        .collect()
}

/// ElectLeaders: one result per partition asked for. With `partitions = None` every
/// partition is considered and those that need no election are left out of the
/// answer (as Kafka does).
pub fn plan_elect_leaders(
    image: &MetadataImage,
    kind: ElectionKind,
    partitions: Option<&[TopicPartition]>,
) -> Plan<PartitionResults> {
    let wanted: Vec<TopicPartition> = match partitions {
        Some(list) => {
            let mut seen = BTreeSet::new();
            list.iter().filter(|tp| seen.insert(*tp)).cloned().collect()
        }
        None => image
            .topics()
            .flat_map(|t| t.partitions.keys().map(|p| (t.name.clone(), *p)))
            .collect(),
    };
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(wanted.len());
    for (name, partition) in wanted {
        let state = image
            .topic(&name)
            .and_then(|t| t.partitions.get(&partition).map(|p| (t.topic_id, p)));
        let result = match state {
            None => Err(PartitionError::UnknownTopicOrPartition(format!(
                "Partition {name}-{partition} does not exist."
            ))),
            Some((topic_id, state)) => elect(image, kind, state).map(|next| {
                if let Some(record) = change_record(topic_id, partition, state, &next) {
                    records.push(record);
                }
            }),
        };
        let needless = matches!(result, Err(PartitionError::ElectionNotNeeded(_)));
        if partitions.is_some() || !needless {
            results.push(((name, partition), result));
        }
    }
    Plan {
        records,
        response: results,
    }
}

fn elect(
    image: &MetadataImage,
    kind: ElectionKind,
    p: &PartitionImage,
) -> Result<PartitionImage, PartitionError> {
    let live = |b: i32| is_live(image, b);
    let mut next = p.clone();
    match kind {
        ElectionKind::Preferred => {
            let Some(&preferred) = p.replicas.first() else {
                return Err(PartitionError::PreferredLeaderNotAvailable(
                    "The partition has no replicas.".into(),
                ));
            };
            if p.leader == preferred {
                return Err(PartitionError::ElectionNotNeeded(
                    "The preferred replica already leads.".into(),
                ));
            }
            if !live(preferred) || !p.isr.contains(&preferred) {
                return Err(PartitionError::PreferredLeaderNotAvailable(format!(
                    "The preferred replica {preferred} is not live or not in the ISR."
                )));
            }
            next.leader = preferred;
        }
        ElectionKind::Unclean => {
            if p.leader >= 0 && live(p.leader) {
                return Err(PartitionError::ElectionNotNeeded(
                    "The partition has a live leader.".into(),
                ));
            }
            if let Some(member) = leader_candidates(p).find(|r| live(*r) && p.isr.contains(r)) {
                next.leader = member;
                next.isr.retain(|r| live(*r));
            } else if let Some(replica) = leader_candidates(p).find(|r| live(*r)) {
                tracing::warn!(replica, isr = ?p.isr, "unclean leader election requested: a replica outside the ISR leads");
                next.leader = replica;
                next.isr = vec![replica];
            } else {
                return Err(PartitionError::EligibleLeadersNotAvailable(
                    "No replica of the partition is live.".into(),
                ));
            }
        }
    }
    Ok(next)
}

#[cfg(test)]
#[path = "election_tests.rs"]
mod tests;
