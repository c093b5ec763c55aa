//! The add-broker plan: the controller's balance planner
//! ([`tidelog_controller::ops::plan_balanced_assignment`], the only one) run over the
//! live brokers plus the new one, and the figures `tidelog cluster add-broker` prints.
//!
//! Replicas on brokers outside the list still count in the total but are never moved
//! (their broker may be down; replacing it is a separate step).

use std::collections::BTreeMap;

use tidelog_controller::ops::{plan_balanced_assignment, Assignment};

/// One partition's replica list before and after the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Move {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    /// Brokers that give up their replica of this partition (none when only the
    /// preferred leader changes).
    pub(crate) from: Vec<i32>,
    pub(crate) old_replicas: Vec<i32>,
    pub(crate) new_replicas: Vec<i32>,
}

/// The plan and the numbers behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddBrokerPlan {
    pub(crate) moves: Vec<Move>,
    /// Replicas in the cluster (all partitions).
    pub(crate) total_replicas: usize,
    /// What the new broker should hold: total / brokers, rounded down.
    pub(crate) target: usize,
    /// Replicas per broker after the moves.
    pub(crate) load_after: BTreeMap<i32, usize>,
    /// Partitions each broker is the preferred leader of after the moves.
    pub(crate) leaders_after: BTreeMap<i32, usize>,
}

/// Plans the moves that balance `current` over `brokers` (id and rack) and
/// `new_broker`, which is added without a rack when the list lacks it.
pub(crate) fn plan_add_broker(
    current: &Assignment,
    brokers: &[(i32, Option<&str>)],
    new_broker: i32,
) -> AddBrokerPlan {
    let mut set = brokers.to_vec();
    if !set.iter().any(|(id, _)| *id == new_broker) {
        set.push((new_broker, None));
    }
    let changes = plan_balanced_assignment(current, &set);
    let mut load_after: BTreeMap<i32, usize> = set.iter().map(|(id, _)| (*id, 0)).collect();
    let mut leaders_after = load_after.clone();
    let mut total_replicas = 0;
    for (tp, replicas) in current {
        let after = changes.get(tp).unwrap_or(replicas);
        total_replicas += after.len();
        if let Some(n) = after.first().and_then(|b| leaders_after.get_mut(b)) {
            *n += 1;
        }
        for b in after {
            if let Some(n) = load_after.get_mut(b) {
                *n += 1;
            }
        }
    }
    let moves = changes
        .into_iter()
        .filter_map(|(tp, new_replicas)| {
            let old_replicas = current.get(&tp)?.clone();
            let from = old_replicas
                .iter()
                .copied()
                .filter(|b| !new_replicas.contains(b))
                .collect();
            Some(Move {
                topic: tp.0,
                partition: tp.1,
                from,
                old_replicas,
                new_replicas,
            })
        })
        .collect();
    AddBrokerPlan {
        moves,
        total_replicas,
        target: total_replicas / load_after.len(),
        load_after,
        leaders_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, replicas: &[&[i32]]) -> Assignment {
        replicas
            .iter()
            .enumerate()
            .map(|(i, r)| ((name.to_owned(), i32::try_from(i).unwrap()), r.to_vec()))
            .collect()
    }

    fn no_racks(ids: &[i32]) -> Vec<(i32, Option<&'static str>)> {
        ids.iter().map(|id| (*id, None)).collect()
    }

    #[test]
    fn three_to_four_brokers_evens_out_the_load() {
        // 12 partitions, RF 2, round-robin over brokers 1-3: 8 replicas each.
        let rr: &[&[i32]] = &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]];
        let mut current = topic("orders", rr);
        current.extend(topic("events", rr));
        let plan = plan_add_broker(&current, &no_racks(&[1, 2, 3]), 4);
        assert_eq!((plan.total_replicas, plan.target), (24, 6));
        assert_eq!(plan.moves.len(), 6);
        assert_eq!(
            plan.load_after.values().copied().collect::<Vec<_>>(),
            vec![6, 6, 6, 6]
        );
        // Preferred leadership is balanced as well: 12 partitions, 3 each.
        assert_eq!(
            plan.leaders_after.values().copied().collect::<Vec<_>>(),
            vec![3, 3, 3, 3]
        );
        // Round-robin over topics: both topics give replicas.
        let from_orders = plan.moves.iter().filter(|m| m.topic == "orders").count();
        assert_eq!(from_orders, 3);
        for m in &plan.moves {
            assert_eq!(m.from.len(), 1, "{m:?}");
            assert_eq!(m.new_replicas.len(), 2);
            assert!(!m.new_replicas.contains(&m.from[0]));
            // Same position: the replaced broker's slot is now the new broker's.
            let slot = m.old_replicas.iter().position(|r| *r == m.from[0]).unwrap();
            assert_eq!(m.new_replicas[slot], 4);
            let kept = m.old_replicas.iter().filter(|r| **r != m.from[0]);
            assert!(kept.clone().all(|r| m.new_replicas.contains(r)));
        }
    }

    #[test]
    fn the_most_loaded_broker_gives_first() {
        // Broker 1 holds 4 replicas, broker 2 holds 2: the plan takes from 1 only.
        let current = topic("t", &[&[1], &[1], &[1], &[1], &[2], &[2]]);
        let plan = plan_add_broker(&current, &no_racks(&[1, 2]), 3);
        assert_eq!(plan.target, 2);
        assert!(plan.moves.iter().all(|m| m.from == [1]));
        assert_eq!(plan.moves.len(), 2);
        assert_eq!(plan.load_after, BTreeMap::from([(1, 2), (2, 2), (3, 2)]));
    }

    #[test]
    fn nothing_to_do_when_balanced_or_too_small() {
        let balanced = topic("t", &[&[1, 2], &[2, 3], &[3, 1]]);
        let plan = plan_add_broker(&balanced, &no_racks(&[1, 2, 3]), 3);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.target, 2);
        // One partition, RF 1: 1 replica over 2 brokers rounds down to 0.
        let tiny = topic("t", &[&[1]]);
        assert!(plan_add_broker(&tiny, &no_racks(&[1]), 2).moves.is_empty());
        assert!(plan_add_broker(&Assignment::new(), &no_racks(&[1, 2]), 3)
            .moves
            .is_empty());
    }

    #[test]
    fn a_partition_already_on_the_new_broker_is_not_moved() {
        // RF 3 on 3 of 4 brokers: broker 4 already holds p0.
        let current = topic("t", &[&[4, 1, 2], &[1, 2, 3], &[2, 3, 1], &[3, 1, 2]]);
        let plan = plan_add_broker(&current, &no_racks(&[1, 2, 3, 4]), 4);
        assert_eq!(plan.target, 3);
        assert!(plan.moves.iter().all(|m| m.partition != 0));
        assert_eq!(plan.load_after.get(&4), Some(&3));
        let total: usize = plan.load_after.values().sum();
        assert_eq!(total, 12);
    }

    #[test]
    fn replicas_on_unlisted_brokers_are_left_alone() {
        // Broker 9 is gone (not in the list): its replicas count but never move.
        let current = topic("t", &[&[9], &[9], &[9], &[9], &[1], &[1]]);
        let plan = plan_add_broker(&current, &no_racks(&[1]), 2);
        assert_eq!(plan.target, 3);
        assert_eq!(plan.moves.len(), 1, "broker 1 gives one of its two");
        assert!(plan.moves.iter().all(|m| m.from == [1]));
        assert_eq!(plan.load_after, BTreeMap::from([(1, 1), (2, 1)]));
    }

    #[test]
    fn racks_pass_through_to_the_planner() {
        // Rack-aware creation over racks a, b, c; the new broker 4 joins rack a, so it
        // takes no replica of a partition broker 1 (rack a) keeps.
        let racks = [(1, "a"), (2, "b"), (3, "c"), (4, "a")].map(|(id, r)| (id, Some(r)));
        let rack = |b: &i32| racks.iter().find(|(id, _)| id == b).and_then(|(_, r)| *r);
        let mut current = topic("orders", &[&[1, 2], &[2, 3], &[3, 1], &[1, 2]]);
        current.extend(topic("events", &[&[2, 3], &[3, 1], &[1, 2], &[2, 3]]));
        let plan = plan_add_broker(&current, &racks, 4);
        assert_eq!((plan.total_replicas, plan.target), (16, 4));
        assert_eq!(
            plan.load_after,
            BTreeMap::from([(1, 4), (2, 4), (3, 4), (4, 4)])
        );
        assert_eq!(plan.leaders_after.values().sum::<usize>(), 8);
        assert!(plan.leaders_after.values().all(|n| *n == 2), "{plan:?}");
        for m in &plan.moves {
            assert_ne!(rack(&m.new_replicas[0]), rack(&m.new_replicas[1]), "{m:?}");
        }
    }
}
