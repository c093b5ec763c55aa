//! Planning partition reassignment (AlterPartitionReassignments) and listing it.
//!
//! Starting a move to `target` from the original replicas `orig`:
//! `replicas = target ++ (orig − target)`, `adding = target − orig`,
//! `removing = orig − target`. The new replicas catch up as followers; when the leader
//! adds the last of them to the ISR (AlterPartition), the move completes:
//! `replicas = target`, the ISR keeps only target members, a removed leader hands over.
//! A move that adds nobody (e.g. a smaller replication factor) completes at once if
//! the ISR already holds the target. Cancelling reverts to `orig`.

use std::collections::BTreeSet;

use super::partition::{
    change_record, complete_if_caught_up, is_live, leader_candidates, PartitionError,
    PartitionResults, Reassignment, TopicPartition,
};
use super::Plan;
use crate::image::{MetadataImage, PartitionImage};

/// One result per requested partition: `Some(target)` starts (or replaces) a move,
/// `None` cancels the one in flight.
pub fn plan_alter_reassignments(
    image: &MetadataImage,
    requests: &[(String, i32, Option<Vec<i32>>)],
) -> Plan<PartitionResults> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(requests.len());
    let mut seen = BTreeSet::new();
    for (name, partition, target) in requests {
        let key: TopicPartition = (name.clone(), *partition);
        let result = if seen.insert(key.clone()) {
            plan_one(image, name, *partition, target.as_deref()).map(|record| {
                records.extend(record);
            })
        } else {
            Err(PartitionError::InvalidRequest(format!(
                "Partition {name}-{partition} is named more than once."
            )))
        };
        results.push((key, result));
    }
    Plan {
        records,
        response: results,
    }
}

fn plan_one(
    image: &MetadataImage,
    name: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> Result<Option<crate::record::MetadataRecord>, PartitionError> {
    let topic = image.topic(name);
    let Some((topic_id, state)) =
        topic.and_then(|t| t.partitions.get(&partition).map(|p| (t.topic_id, p)))
    else {
        return Err(PartitionError::UnknownTopicOrPartition(format!(
            "Partition {name}-{partition} does not exist."
        )));
    };
    let orig: Vec<i32> = state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.adding_replicas.contains(r))
        .collect();
    let target = match target {
        Some(target) => {
            check_target(image, target)?;
            target.to_vec()
        }
        None if state.is_reassigning() => orig.clone(),
        None => {
            return Err(PartitionError::NoReassignmentInProgress(format!(
                "Partition {name}-{partition} has no reassignment in progress."
            )))
        }
    };
    let mut next = state.clone();
    next.replicas = target.clone();
    next.replicas
        .extend(orig.iter().filter(|r| !target.contains(r)));
    next.adding_replicas = target
        .iter()
        .copied()
        .filter(|r| !orig.contains(r))
        .collect();
    next.removing_replicas = orig
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    next.isr.retain(|r| next.replicas.contains(r));
    if next.isr.is_empty() {
        return Err(PartitionError::InvalidReplicaAssignment(format!(
            "Partition {name}-{partition}: no in-sync replica would remain."
        )));
    }
    let live = |b: i32| is_live(image, b);
    if !next.replicas.contains(&next.leader) {
        next.leader = first_live_isr_member(&next, live);
    }
    complete_if_caught_up(&mut next, live);
    Ok(change_record(topic_id, partition, state, &next))
}

fn first_live_isr_member(p: &PartitionImage, live: impl Fn(i32) -> bool) -> i32 {
    leader_candidates(p)
        .find(|r| p.isr.contains(r) && live(*r))
        .unwrap_or(-1)
}

fn check_target(image: &MetadataImage, target: &[i32]) -> Result<(), PartitionError> {
    let bad = |why: String| Err(PartitionError::InvalidReplicaAssignment(why));
    if target.is_empty() {
        return bad("The target replica list is empty.".into());
    }
    for (i, broker) in target.iter().enumerate() {
        if target[..i].contains(broker) {
            return bad(format!("The target replicas name broker {broker} twice."));
        }
        if image.broker(*broker).is_none() {
            return bad(format!(
                "Broker {broker} in the target replicas is not registered."
            ));
        }
    }
    Ok(())
}

/// The in-flight reassignments, of every partition or of those named.
pub fn list_reassignments(
    image: &MetadataImage,
    partitions: Option<&[TopicPartition]>,
) -> Vec<Reassignment> {
    let entry = |name: &str, partition: i32, p: &PartitionImage| Reassignment {
        topic: name.to_owned(),
        partition,
        replicas: p.replicas.clone(),
        adding: p.adding_replicas.clone(),
        removing: p.removing_replicas.clone(),
    };
    match partitions {
        None => image
            .topics()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.is_reassigning())
                    .map(|(i, p)| entry(&t.name, *i, p))
            })
            .collect(),
        Some(list) => list
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|(name, partition)| {
                let p = image.topic(name)?.partitions.get(partition)?;
                p.is_reassigning().then(|| entry(name, *partition, p))
            })
            .collect(),
    }
}

#[cfg(test)]
#[path = "reassign_tests.rs"]
mod tests;
