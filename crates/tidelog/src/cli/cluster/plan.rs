//! The add-broker plan: which replicas to move onto a new (usually empty) broker so that
//! every broker ends up holding about the same number of replicas.
//!
//! Pure: it sees the current assignment and the broker list, and returns moves. Each
//! move replaces one replica of one partition with the new broker, in the same position
//! of the replica list, so moving a preferred leader (the first replica) makes the new
//! broker that partition's preferred leader. A partition gets at most one move. Donors
//! are always the most loaded brokers; from a donor that prefers-leads more than its
//! share, a partition it leads is taken while the new broker leads less than its share
//! (partitions / brokers), otherwise one where it is a follower, so preferred leadership
//! ends up balanced too. Partitions are taken round-robin over topics so no single
//! topic lands on the new broker.

use std::collections::BTreeMap;

/// One partition's replicas, preferred leader first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) replicas: Vec<i32>,
}

/// Replace `from` by `to` in one partition's replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Move {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) from: i32,
    pub(crate) to: i32,
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

/// Plans moves onto `new_broker`. `brokers` are the brokers that may hold replicas (the
/// new one included or not: it is added). Replicas on brokers outside the list still
/// count but are never moved (their broker may be down; replacing it is a separate step).
pub(crate) fn plan_add_broker(
    assignments: &[Assignment],
    brokers: &[i32],
    new_broker: i32,
) -> AddBrokerPlan {
    let mut load: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    load.insert(new_broker, 0);
    let mut leads: BTreeMap<i32, usize> = load.keys().map(|b| (*b, 0)).collect();
    let mut total_replicas = 0;
    for a in assignments {
        if let Some(n) = a.replicas.first().and_then(|first| leads.get_mut(first)) {
            *n += 1;
        }
        for r in &a.replicas {
            total_replicas += 1;
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    let target = total_replicas / load.len();
    let leader_target = assignments.len() / load.len();
    // Candidates per donor: partitions without the new broker, ordered so that taking
    // them front to back rotates through topics (the k-th partition of each topic
    // before any topic's (k+1)-th).
    let mut rank_in_topic: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ranked: Vec<(usize, &Assignment)> = assignments
        .iter()
        .filter(|a| !a.replicas.contains(&new_broker))
        .map(|a| {
            let rank = rank_in_topic.entry(a.topic.as_str()).or_insert(0);
            *rank += 1;
            (*rank, a)
        })
        .collect();
    ranked
        .sort_by(|(ra, a), (rb, b)| (ra, &a.topic, a.partition).cmp(&(rb, &b.topic, b.partition)));
    let mut moved = vec![false; ranked.len()];
    let mut moves = Vec::new();
    while load.get(&new_broker).copied().unwrap_or(0) < target {
        // The most loaded donor that still has a movable partition; ties go to the
        // lowest id so the plan is the same every run.
        let new_load = load.get(&new_broker).copied().unwrap_or(0);
        let mut donors: Vec<(i32, usize)> = load
            .iter()
            .filter(|(b, n)| **b != new_broker && **n > new_load + 1)
            .map(|(b, n)| (*b, *n))
            .collect();
        donors.sort_by(|(ba, na), (bb, nb)| nb.cmp(na).then(ba.cmp(bb)));
        let new_leads = leads.get(&new_broker).copied().unwrap_or(0);
        let pick = donors.iter().find_map(|(donor, _)| {
            let donor_leads = leads.get(donor).copied().unwrap_or(0);
            let take_lead = new_leads < leader_target && donor_leads > leader_target;
            let movable = |i: &usize, a: &Assignment| !moved[*i] && a.replicas.contains(donor);
            let leads_it = |a: &Assignment| a.replicas.first() == Some(donor);
            let candidates = || {
                ranked
                    .iter()
                    .enumerate()
                    .filter(|(i, (_, a))| movable(i, a))
            };
            candidates()
                .find(|(_, (_, a))| leads_it(a) == take_lead)
                .or_else(|| candidates().next())
                .map(|(i, (_, a))| (i, *donor, *a))
        });
        let Some((index, donor, assignment)) = pick else {
            break;
        };
        moved[index] = true;
        if assignment.replicas.first() == Some(&donor) {
            if let Some(n) = leads.get_mut(&donor) {
                *n -= 1;
            }
            *leads.entry(new_broker).or_insert(0) += 1;
        }
        let new_replicas: Vec<i32> = assignment
            .replicas
            .iter()
            .map(|r| if *r == donor { new_broker } else { *r })
            .collect();
        if let Some(n) = load.get_mut(&donor) {
            *n -= 1;
        }
        *load.entry(new_broker).or_insert(0) += 1;
        moves.push(Move {
            topic: assignment.topic.clone(),
            partition: assignment.partition,
            from: donor,
            to: new_broker,
            old_replicas: assignment.replicas.clone(),
            new_replicas,
        });
    }
    moves.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    AddBrokerPlan {
        moves,
        total_replicas,
        target,
        load_after: load,
        leaders_after: leads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, replicas: &[&[i32]]) -> Vec<Assignment> {
        replicas
            .iter()
            .enumerate()
            .map(|(i, r)| Assignment {
                topic: name.into(),
                partition: i32::try_from(i).unwrap(),
                replicas: r.to_vec(),
            })
            .collect()
    }

    #[test]
    fn three_to_four_brokers_evens_out_the_load() {
        // 12 partitions, RF 2, round-robin over brokers 1-3: 8 replicas each.
        let mut assignments = topic(
            "orders",
            &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]],
        );
        assignments.extend(topic(
            "events",
            &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]],
        ));
        let plan = plan_add_broker(&assignments, &[1, 2, 3], 4);
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
            assert_eq!(m.new_replicas.len(), 2);
            assert!(m.new_replicas.contains(&4));
            assert!(!m.new_replicas.contains(&m.from));
            let kept = m.old_replicas.iter().filter(|r| **r != m.from);
            assert!(kept.clone().all(|r| m.new_replicas.contains(r)));
            // Same position: the replaced broker's slot is now the new broker's.
            let slot = m.old_replicas.iter().position(|r| *r == m.from).unwrap();
            assert_eq!(m.new_replicas[slot], 4);
        }
        let partitions: std::collections::BTreeSet<_> =
            plan.moves.iter().map(|m| (&m.topic, m.partition)).collect();
        assert_eq!(partitions.len(), 6, "one move per partition");
    }

    #[test]
    fn the_most_loaded_broker_gives_first() {
        // Broker 1 holds 4 replicas, broker 2 holds 2: the plan takes from 1 only.
        let assignments = topic("t", &[&[1], &[1], &[1], &[1], &[2], &[2]]);
        let plan = plan_add_broker(&assignments, &[1, 2], 3);
        assert_eq!(plan.target, 2);
        assert!(plan.moves.iter().all(|m| m.from == 1));
        assert_eq!(plan.moves.len(), 2);
        assert_eq!(plan.load_after, BTreeMap::from([(1, 2), (2, 2), (3, 2)]));
    }

    #[test]
    fn nothing_to_do_when_balanced_or_too_small() {
        let balanced = topic("t", &[&[1, 2], &[2, 3], &[3, 1]]);
        let plan = plan_add_broker(&balanced, &[1, 2, 3], 3);
        assert!(plan.moves.is_empty());
        // One partition, RF 1: 1 replica over 2 brokers rounds down to 0.
        let tiny = topic("t", &[&[1]]);
        assert!(plan_add_broker(&tiny, &[1], 2).moves.is_empty());
        assert!(plan_add_broker(&[], &[1, 2], 3).moves.is_empty());
    }

    #[test]
    fn a_partition_already_on_the_new_broker_is_not_moved() {
        // RF 3 on 3 of 4 brokers: broker 4 already holds p0.
        let assignments = topic("t", &[&[4, 1, 2], &[1, 2, 3], &[2, 3, 1], &[3, 1, 2]]);
        let plan = plan_add_broker(&assignments, &[1, 2, 3, 4], 4);
        assert_eq!(plan.target, 3);
        assert!(plan.moves.iter().all(|m| m.partition != 0));
        assert_eq!(plan.load_after.get(&4), Some(&3));
        let total: usize = plan.load_after.values().sum();
        assert_eq!(total, 12);
    }

    #[test]
    fn replicas_on_unlisted_brokers_are_left_alone() {
        // Broker 9 is gone (not in the list): its replicas count but never move.
        let assignments = topic("t", &[&[9], &[9], &[9], &[9], &[1], &[1]]);
        let plan = plan_add_broker(&assignments, &[1], 2);
        assert_eq!(plan.target, 3);
        assert_eq!(plan.moves.len(), 1, "broker 1 gives one of its two");
        assert!(plan.moves.iter().all(|m| m.from == 1));
        assert_eq!(plan.load_after, BTreeMap::from([(1, 1), (2, 1)]));
    }
}
