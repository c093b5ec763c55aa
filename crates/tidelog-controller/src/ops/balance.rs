//! Planning a balanced assignment (what `tidelog cluster add-broker` and
//! `tidelog partition reassign` propose): the replica lists that spread every
//! partition's replicas, and its preferred leaders, evenly over a set of brokers, with
//! as few moves as the greedy steps below find. The result is only a proposal; it
//! becomes real through [`super::plan_alter_reassignments`].
//!
//! 1. Replicas on brokers outside the set (a dead or retiring broker) move to the
//!    least loaded broker of the set that the partition does not use yet.
//! 2. While the most and least loaded brokers differ by more than one replica, one
//!    replica moves from the most to the least loaded, a follower position first, so
//!    preferred leaders stay where they are when possible.
//! 3. While preferred leaderships differ by more than one, a partition led by the
//!    busiest broker swaps its first replica with the least busy one among its replicas.

use std::collections::BTreeMap;

use super::partition::TopicPartition;
use crate::image::MetadataImage;

/// The partitions whose replica list should change, with their new lists, to balance
/// all topics over `brokers`. Each step is bounded by the number of replicas.
pub fn plan_balanced_assignment(
    image: &MetadataImage,
    brokers: &[i32],
) -> Vec<(String, i32, Vec<i32>)> {
    if brokers.is_empty() {
        return Vec::new();
    }
    let current: BTreeMap<TopicPartition, Vec<i32>> = image
        .topics()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|(p, state)| ((t.name.clone(), *p), state.target_replicas()))
        })
        .collect();
    let mut next = current.clone();
    let bound = next.values().map(Vec::len).sum::<usize>() + 1;
    move_off_other_brokers(&mut next, brokers);
    spread_replicas(&mut next, brokers, bound);
    spread_leaders(&mut next, brokers, bound);
    next.into_iter()
        .filter(|(tp, replicas)| current.get(tp) != Some(replicas))
        .map(|((topic, partition), replicas)| (topic, partition, replicas))
        .collect()
}

type Assignment = BTreeMap<TopicPartition, Vec<i32>>;

fn replica_counts(assignment: &Assignment, brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for replicas in assignment.values() {
        for r in replicas {
            if let Some(n) = counts.get_mut(r) {
                *n += 1;
            }
        }
    }
    counts
}

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

fn move_off_other_brokers(assignment: &mut Assignment, brokers: &[i32]) {
    let keys: Vec<TopicPartition> = assignment.keys().cloned().collect();
    for key in keys {
        let mut counts = replica_counts(assignment, brokers);
        let Some(replicas) = assignment.get_mut(&key) else {
            continue;
        };
        for i in 0..replicas.len() {
            if brokers.contains(&replicas[i]) {
                continue;
            }
            let target = counts
                .iter()
                .filter(|(b, _)| !replicas.contains(b))
                .min_by_key(|(_, n)| **n)
                .map(|(b, _)| *b);
            if let Some(target) = target {
                replicas[i] = target;
                if let Some(n) = counts.get_mut(&target) {
                    *n += 1;
                }
            }
        }
    }
}

fn spread_replicas(assignment: &mut Assignment, brokers: &[i32], bound: usize) {
    for _ in 0..bound {
        let counts = replica_counts(assignment, brokers);
        let Some(((hi, most), (lo, fewest))) = extremes(&counts) else {
            return;
        };
        if most <= fewest + 1 {
            return;
        }
        // A follower position first; a preferred-leader position only if needed.
        let mut choice = None;
        for (key, replicas) in assignment.iter() {
            if replicas.contains(&lo) {
                continue;
            }
            match replicas.iter().position(|r| *r == hi) {
                Some(0) if choice.is_none() => choice = Some((key.clone(), 0)),
                Some(i) if i > 0 => {
                    choice = Some((key.clone(), i));
                    break;
                }
                _ => {}
            }
        }
        let Some((key, i)) = choice else {
            return;
        };
        if let Some(replicas) = assignment.get_mut(&key) {
            replicas[i] = lo;
        }
    }
}

fn spread_leaders(assignment: &mut Assignment, brokers: &[i32], bound: usize) {
    for _ in 0..bound {
        let counts = leader_counts(assignment, brokers);
        let Some(((hi, most), (lo, fewest))) = extremes(&counts) else {
            return;
        };
        if most <= fewest + 1 {
            return;
        }
        let swap = assignment
            .iter()
            .find(|(_, r)| r.first() == Some(&hi) && r.contains(&lo))
            .map(|(key, r)| (key.clone(), r.iter().position(|b| *b == lo)));
        let Some((key, Some(j))) = swap else {
            return;
        };
        if let Some(replicas) = assignment.get_mut(&key) {
            replicas.swap(0, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::Images;

    fn applied(images: &Images, plan: &[(String, i32, Vec<i32>)]) -> Assignment {
        let mut all: Assignment = images
            .image
            .topics()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|(p, s)| ((t.name.clone(), *p), s.replicas.clone()))
            })
            .collect();
        for (topic, partition, replicas) in plan {
            all.insert((topic.clone(), *partition), replicas.clone());
        }
        all
    }

    fn assert_balanced(all: &Assignment, brokers: &[i32], rf: usize) {
        for replicas in all.values() {
            assert_eq!(replicas.len(), rf);
            let mut ids = replicas.clone();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), rf, "{replicas:?}");
            assert!(replicas.iter().all(|r| brokers.contains(r)), "{replicas:?}");
        }
        for counts in [replica_counts(all, brokers), leader_counts(all, brokers)] {
            let (most, fewest) = extremes(&counts).map(|(a, b)| (a.1, b.1)).unwrap();
            assert!(most <= fewest + 1, "{counts:?}");
        }
    }

    #[test]
    fn a_new_empty_broker_gets_its_share_of_replicas_and_leaderships() {
        let three: [&[i32]; 3] = [&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]];
        let parts: Vec<(&[i32], &[i32], i32)> = (0..8)
            .map(|i| (three[i % 3], three[i % 3], three[i % 3][0]))
            .collect();
        let images = Images::new().brokers(&[1, 2, 3, 4]).topic("t", &parts);
        let plan = plan_balanced_assignment(&images.image, &[1, 2, 3, 4]);
        let all = applied(&images, &plan);
        assert_balanced(&all, &[1, 2, 3, 4], 3);
        assert_eq!(
            replica_counts(&all, &[4])[&4],
            6,
            "24 replicas over 4 brokers"
        );
        // Only the moves needed: 6 replicas land on broker 4, each in its own partition.
        assert_eq!(plan.len(), 6, "{plan:?}");
        // Balanced already: nothing to do.
        assert!(plan_balanced_assignment(&images.image, &[1, 2, 3]).is_empty());
    }

    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

        /// Any assignment over brokers 1..=5, balanced over any set of at least three:
        /// valid replica lists inside the set, replica counts within one of each other.
        #[test]
        fn any_assignment_balances_replicas_over_any_set(
            parts in proptest::collection::vec(
                proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5], 3).prop_shuffle(),
                1..12,
            ),
            set in proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5], 3..=5),
        ) {
            let refs: Vec<(&[i32], &[i32], i32)> =
                parts.iter().map(|r| (&r[..], &r[..], r[0])).collect();
            let images = Images::new().brokers(&[1, 2, 3, 4, 5]).topic("t", &refs);
            let all = applied(&images, &plan_balanced_assignment(&images.image, &set));
            for replicas in all.values() {
                let mut ids = replicas.clone();
                ids.sort_unstable();
                ids.dedup();
                proptest::prop_assert_eq!(ids.len(), 3);
                proptest::prop_assert!(replicas.iter().all(|r| set.contains(r)));
            }
            let counts = replica_counts(&all, &set);
            let (most, fewest) = extremes(&counts).map(|(a, b)| (a.1, b.1)).unwrap();
            proptest::prop_assert!(most <= fewest + 1, "{:?}", counts);
        }
    }

    #[test]
    fn replicas_leave_brokers_outside_the_set() {
        let images = Images::new().brokers(&[1, 2, 3, 4]).topic(
            "t",
            &[
                (&[1, 3], &[1, 3], 1),
                (&[3, 2], &[3, 2], 3),
                (&[2, 1], &[2, 1], 2),
            ],
        );
        let plan = plan_balanced_assignment(&images.image, &[1, 2, 4]);
        let all = applied(&images, &plan);
        assert_balanced(&all, &[1, 2, 4], 2);
    }
}
