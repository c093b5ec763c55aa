//! The one rebalance planner: the replica lists that spread replicas, and preferred
//! leaders, evenly over a set of brokers with few changes, never putting a second
//! replica of a partition in a rack that already holds one while another rack could
//! take it. `tidelog cluster add-broker` plans with it (the set is the live brokers
//! plus the new one); on the controller side [`assignment_of`] gives it an image's
//! assignment. The result is only a proposal; it becomes real through
//! [`super::plan_alter_reassignments`].
//!
//! It works on a plain assignment so the CLI, which only sees Metadata responses, and
//! the controller, which sees the image, run the same steps:
//!
//! 1. While the most and least loaded brokers of the set differ by more than one
//!    replica, one replica moves to the least loaded broker from the most loaded donor
//!    that has a partition the receiver does not hold and the racks allow. The moved
//!    replica keeps its position in the list. A preferred-leader position is taken
//!    while the receiver leads fewer than its share and the donor more, a follower
//!    position otherwise, so leadership mostly balances without extra changes.
//!    Partitions are tried round-robin over topics (the k-th partition of every topic
//!    before any topic's (k+1)-th), so no single topic piles onto one broker.
//! 2. While preferred leaderships still differ by more than one, the busiest broker
//!    hands one to a broker leading at least two fewer: a partition it leads swaps its
//!    first replica with that broker's, or, when they share no such partition, with
//!    the next broker's along the shortest chain of such swaps. Partitions step 1
//!    changed already are used first.
//!
//! Replicas on brokers outside the set are never moved and do not count towards any
//! load: their broker may be down, and replacing it is a separate, deliberate step
//! (`tidelog partition reassign`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::partition::TopicPartition;
use crate::image::MetadataImage;

/// Every partition's replicas, preferred leader first.
pub type Assignment = BTreeMap<TopicPartition, Vec<i32>>;

/// The replica lists an image is heading to (a reassignment's target, else the
/// current list): what [`plan_balanced_assignment`] starts from.
pub fn assignment_of(image: &MetadataImage) -> Assignment {
    image
        .topics()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|(p, state)| ((t.name.clone(), *p), state.target_replicas()))
        })
        .collect()
}

/// The partitions whose replica list should change, with their new lists, to balance
/// `current` over `brokers` (id and rack, when it has one). A broker without a rack
/// takes part in no rack rule. Both steps are bounded by the number of replicas.
pub fn plan_balanced_assignment(
    current: &Assignment,
    brokers: &[(i32, Option<&str>)],
) -> Assignment {
    let racks: Racks<'_> = brokers.iter().copied().collect();
    if racks.is_empty() {
        return Assignment::new();
    }
    let order = topic_rotation(current);
    // Every move lowers the replicas above or below the even share, each at most
    // the total.
    let bound = 2 * current.values().map(Vec::len).sum::<usize>() + 1;
    let mut next = current.clone();
    spread_replicas(&mut next, &order, &racks, bound);
    spread_leaders(&mut next, current, &order, &racks, bound);
    next.into_iter()
        .filter(|(tp, replicas)| current.get(tp) != Some(replicas))
        .collect()
}

type Racks<'a> = BTreeMap<i32, Option<&'a str>>;

/// Replicas per broker of the set.
fn replica_counts(assignment: &Assignment, brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for r in assignment.values().flatten() {
        if let Some(n) = counts.get_mut(r) {
            *n += 1;
        }
    }
    counts
}

/// Partitions each broker of the set is the preferred leader of.
fn leader_counts(assignment: &Assignment, brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for replicas in assignment.values() {
        if let Some(n) = replicas.first().and_then(|r| counts.get_mut(r)) {
            *n += 1;
        }
    }
    counts
}

/// The brokers with the most and the fewest (ties: lowest id), and their counts.
fn extremes(counts: &BTreeMap<i32, usize>) -> Option<((i32, usize), (i32, usize))> {
    let most = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(b, n)| (*b, *n))?;
    let fewest = counts
        .iter()
        .min_by_key(|(_, n)| **n)
        .map(|(b, n)| (*b, *n))?;
    Some((most, fewest))
}

/// Partitions ordered so that taking them front to back rotates through topics.
fn topic_rotation(assignment: &Assignment) -> Vec<TopicPartition> {
    let mut rank_in_topic: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ranked: Vec<(usize, &TopicPartition)> = assignment
        .keys()
        .map(|tp| {
            let rank = rank_in_topic.entry(tp.0.as_str()).or_insert(0);
            *rank += 1;
            (*rank, tp)
        })
        .collect();
    ranked.sort();
    ranked.into_iter().map(|(_, tp)| tp.clone()).collect()
}

/// Whether replacing `from` by `to` keeps the racks spread: `to`'s rack is not used by
/// the partition's other replicas, or every known rack is (no other rack could take it).
fn racks_allow(replicas: &[i32], from: i32, to: i32, racks: &Racks<'_>) -> bool {
    let Some(to_rack) = racks.get(&to).copied().flatten() else {
        return true;
    };
    let used: BTreeSet<&str> = replicas
        .iter()
        .filter(|r| **r != from)
        .filter_map(|r| racks.get(r).copied().flatten())
        .collect();
    !used.contains(to_rack) || racks.values().flatten().all(|rack| used.contains(rack))
}

fn spread_replicas(
    assignment: &mut Assignment,
    order: &[TopicPartition],
    racks: &Racks<'_>,
    bound: usize,
) {
    let ids: Vec<i32> = racks.keys().copied().collect();
    for _ in 0..bound {
        let loads = replica_counts(assignment, &ids);
        let leads = leader_counts(assignment, &ids);
        let Some((_, (to, fewest))) = extremes(&loads) else {
            return;
        };
        let led_in_set: usize = leads.values().sum();
        let leader_share = led_in_set / ids.len();
        let to_leads = leads.get(&to).copied().unwrap_or(0);
        let mut donors: Vec<(i32, usize)> = loads
            .iter()
            .filter(|(_, n)| **n > fewest + 1)
            .map(|(b, n)| (*b, *n))
            .collect();
        donors.sort_by(|(ba, na), (bb, nb)| nb.cmp(na).then(ba.cmp(bb)));
        let pick = donors.iter().find_map(|(from, _)| {
            let take_lead =
                to_leads < leader_share && leads.get(from).copied().unwrap_or(0) > leader_share;
            let candidates = || {
                order.iter().filter_map(|tp| {
                    let replicas = assignment.get(tp)?;
                    let slot = replicas.iter().position(|r| r == from)?;
                    let movable =
                        !replicas.contains(&to) && racks_allow(replicas, *from, to, racks);
                    movable.then_some((tp, slot))
                })
            };
            candidates()
                .find(|(_, slot)| (*slot == 0) == take_lead)
                .or_else(|| candidates().next())
                .map(|(tp, slot)| (tp.clone(), slot))
        });
        let Some((tp, slot)) = pick else {
            return;
        };
        if let Some(replica) = assignment.get_mut(&tp).and_then(|r| r.get_mut(slot)) {
            *replica = to;
        }
    }
}

fn spread_leaders(
    assignment: &mut Assignment,
    current: &Assignment,
    order: &[TopicPartition],
    racks: &Racks<'_>,
    bound: usize,
) {
    let ids: Vec<i32> = racks.keys().copied().collect();
    for _ in 0..bound {
        let leads = leader_counts(assignment, &ids);
        let Some(((busiest, most), _)) = extremes(&leads) else {
            return;
        };
        let Some(path) = leadership_path(assignment, current, order, &leads, (busiest, most))
        else {
            return;
        };
        for (tp, slot) in path {
            if let Some(replicas) = assignment.get_mut(&tp) {
                replicas.swap(0, slot);
            }
        }
    }
}

/// The swaps that hand one preferred leadership from the busiest broker to one that
/// leads at least two fewer, along the shortest chain of brokers where each leads a
/// partition the next one holds: with racks, the two ends often share no partition.
/// Every broker between the ends gains one leadership and loses one. Partitions
/// changed already are used first.
fn leadership_path(
    assignment: &Assignment,
    current: &Assignment,
    order: &[TopicPartition],
    leads: &BTreeMap<i32, usize>,
    (busiest, most): (i32, usize),
) -> Option<Vec<(TopicPartition, usize)>> {
    // Broker reached -> (broker it was reached from, partition, slot of the broker).
    let mut via: BTreeMap<i32, (i32, TopicPartition, usize)> = BTreeMap::new();
    let mut queue = VecDeque::from([busiest]);
    while let Some(from) = queue.pop_front() {
        let mut led: Vec<(bool, &TopicPartition, &Vec<i32>)> = order
            .iter()
            .filter_map(|tp| {
                let replicas = assignment.get(tp)?;
                let unchanged = current.get(tp) == Some(replicas);
                (replicas.first() == Some(&from)).then_some((unchanged, tp, replicas))
            })
            .collect();
        led.sort_by_key(|(unchanged, _, _)| *unchanged);
        for (_, tp, replicas) in led {
            for (slot, to) in replicas.iter().enumerate().skip(1) {
                let Some(to_leads) = leads.get(to) else {
                    continue;
                };
                if *to == busiest || via.contains_key(to) {
                    continue;
                }
                via.insert(*to, (from, tp.clone(), slot));
                if to_leads + 1 < most {
                    let mut path = Vec::new();
                    let mut at = *to;
                    while at != busiest {
                        let (previous, tp, slot) = via.get(&at)?.clone();
                        path.push((tp, slot));
                        at = previous;
                    }
                    return Some(path);
                }
                queue.push_back(*to);
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "balance_tests.rs"]
mod tests;
