//! The cooperative-sticky assignor (KIP-429), run by the group leader of a classic group.
//!
//! Sticky: every member keeps what it validly owns, the partitions nobody owns go to the
//! least loaded members, and then partitions move one at a time from the most to the
//! least loaded member until no move can bring two members closer than one partition.
//! So a joining member takes only its share, and a leaving member's partitions are
//! spread without disturbing anyone else.
//!
//! Cooperative: a partition that moves is first left out of the new assignment, since
//! its current owner still consumes it. The owner sees it missing, revokes it and
//! rejoins at once, and the next round gives it to the new member. Nothing is ever
//! owned by two members.
//!
//! A claim is valid when the member subscribes to the topic and the partition exists;
//! two members claiming one partition are resolved for the newer generation (then the
//! earlier member in Kafka's member order), so a member fenced and forgotten loses to
//! the one that took its place.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::assignors::{GroupAssignment, MemberSubscription};
use crate::partition_admin::TopicPartition;

/// `members` in Kafka's member order; `partition_counts` of the subscribed topics.
pub(crate) fn assign(
    members: &[&MemberSubscription],
    partition_counts: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let subscribes = |m: usize, tp: &TopicPartition| members[m].topics.contains(&tp.0);
    let all: BTreeSet<TopicPartition> = partition_counts
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t)))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| (t.clone(), p)))
        .collect();

    let mut claims: Vec<(Reverse<i32>, usize, &TopicPartition)> = members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.owned.iter().map(move |tp| (Reverse(m.generation), i, tp)))
        .collect();
    claims.sort();
    let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (_, member, tp) in claims {
        if all.contains(tp) && subscribes(member, tp) && !owner.contains_key(tp) {
            owner.insert(tp.clone(), member);
        }
    }

    let mut held: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); members.len()];
    for (tp, &m) in &owner {
        held[m].insert(tp.clone());
    }
    for tp in all.iter().filter(|tp| !owner.contains_key(*tp)) {
        let least = (0..members.len())
            .filter(|&m| subscribes(m, tp))
            .min_by_key(|&m| (held[m].len(), m));
        if let Some(m) = least {
            held[m].insert(tp.clone());
        }
    }
    balance(&mut held, &owner, &subscribes, all.len());

    let mut out: GroupAssignment = BTreeMap::new();
    for (m, partitions) in held.into_iter().enumerate() {
        let topics = out.entry(members[m].member_id.clone()).or_default();
        for tp in partitions {
            // Still someone else's: assigned next round, after that member revoked it.
            if owner.get(&tp).is_some_and(|&o| o != m) {
                continue;
            }
            topics.entry(tp.0).or_default().push(tp.1);
        }
    }
    out
}

/// Moves partitions from the most to a less loaded member while that narrows the gap by
/// two or more. Each move lowers the sum of squared loads, so this ends; the cap only
/// bounds the work on an input this reasoning missed.
fn balance(
    held: &mut [BTreeSet<TopicPartition>],
    owner: &BTreeMap<TopicPartition, usize>,
    subscribes: &dyn Fn(usize, &TopicPartition) -> bool,
    partitions: usize,
) {
    let cap = partitions.saturating_mul(4).saturating_add(16);
    for _ in 0..cap {
        let mut donors: Vec<usize> = (0..held.len()).collect();
        donors.sort_by_key(|&m| (Reverse(held[m].len()), m));
        let mut moved = false;
        'donors: for donor in donors {
            let load = held[donor].len();
            // Partitions the donor did not own before are given up first: stickiness.
            let mut candidates: Vec<&TopicPartition> = held[donor].iter().collect();
            candidates.sort_by_key(|tp| (owner.get(*tp) == Some(&donor), Reverse(*tp)));
            for tp in candidates {
                let receiver = (0..held.len())
                    .filter(|&m| m != donor && subscribes(m, tp) && held[m].len() + 1 < load)
                    .min_by_key(|&m| (held[m].len(), m));
                if let Some(receiver) = receiver {
                    let tp = tp.clone();
                    held[donor].remove(&tp);
                    held[receiver].insert(tp);
                    moved = true;
                    break 'donors;
                }
            }
        }
        if !moved {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(
        id: &str,
        topics: &[&str],
        owned: &[(&str, i32)],
        generation: i32,
    ) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            instance_id: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            owned: owned.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect(),
            generation,
        }
    }

    fn run(members: &[MemberSubscription], counts: &[(&str, i32)]) -> GroupAssignment {
        let counts = counts.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect();
        assign(&members.iter().collect::<Vec<_>>(), &counts)
    }

    fn owned_of(out: &GroupAssignment, id: &str) -> Vec<TopicPartition> {
        out[id]
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    }

    fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
    }

    fn loads(out: &GroupAssignment) -> Vec<usize> {
        out.values()
            .map(|t| t.values().map(Vec::len).sum())
            .collect()
    }

    #[test]
    fn a_fresh_group_is_balanced_and_every_partition_assigned_once() {
        let members: Vec<_> = (0..3)
            .map(|i| member(&format!("m{i}"), &["t"], &[], -1))
            .collect();
        let out = run(&members, &[("t", 10)]);
        let mut l = loads(&out);
        l.sort_unstable();
        assert_eq!(l, vec![3, 3, 4]);
        let mut all: Vec<i32> = out.values().flat_map(|t| t["t"].clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_joining_member_takes_only_its_share_and_nothing_still_owned() {
        let t = |ps: &[i32]| ps.iter().map(|p| ("t", *p)).collect::<Vec<_>>();
        let members = [
            member("a", &["t"], &t(&[0, 1, 2, 3]), 5),
            member("b", &["t"], &t(&[4, 5, 6, 7]), 5),
            member("c", &["t"], &t(&[8, 9, 10, 11]), 5),
            member("d", &["t"], &[], -1),
        ];
        let out = run(&members, &[("t", 12)]);
        // First round: each old member keeps three of its four; the fourth of each is
        // left out (to be revoked), and the newcomer gets nothing yet.
        for id in ["a", "b", "c"] {
            let kept = owned_of(&out, id);
            assert_eq!(kept.len(), 3, "{id}: {kept:?}");
            let before = &members.iter().find(|m| m.member_id == id).unwrap().owned;
            assert!(kept.iter().all(|tp| before.contains(tp)));
        }
        assert!(owned_of(&out, "d").is_empty());
        // Second round, after the revocations: the freed partitions go to the newcomer.
        let again: Vec<MemberSubscription> = members
            .iter()
            .map(|m| {
                let mut next = m.clone();
                next.owned = owned_of(&out, &m.member_id);
                next.generation = 6;
                next
            })
            .collect();
        let out2 = run(&again, &[("t", 12)]);
        for id in ["a", "b", "c"] {
            assert_eq!(
                owned_of(&out2, id),
                owned_of(&out, id),
                "{id} keeps its partitions"
            );
        }
        assert_eq!(owned_of(&out2, "d").len(), 3);
        assert_eq!(loads(&out2), vec![3, 3, 3, 3]);
    }

    #[test]
    fn a_leaving_members_partitions_are_spread_and_the_rest_stay() {
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 1), ("t", 2)], 3),
            member("b", &["t"], &[("t", 3), ("t", 4), ("t", 5)], 3),
        ];
        // c owned 6, 7, 8 and left.
        let out = run(&members, &[("t", 9)]);
        let (a, b) = (owned_of(&out, "a"), owned_of(&out, "b"));
        assert!(
            a.starts_with(&tps(&[("t", 0), ("t", 1), ("t", 2)])),
            "{a:?}"
        );
        let mut l = loads(&out);
        l.sort_unstable();
        assert_eq!(l, vec![4, 5]);
        for tp in tps(&[("t", 3), ("t", 4), ("t", 5)]) {
            assert!(b.contains(&tp));
        }
    }

    #[test]
    fn a_claim_of_an_older_generation_loses_and_invalid_claims_are_ignored() {
        let members = [
            member(
                "stale",
                &["t"],
                &[("t", 0), ("t", 1), ("gone", 0), ("t", 99)],
                2,
            ),
            member("fresh", &["t"], &[("t", 0)], 4),
        ];
        let out = run(&members, &[("t", 2)]);
        assert_eq!(owned_of(&out, "fresh"), tps(&[("t", 0)]));
        assert_eq!(owned_of(&out, "stale"), tps(&[("t", 1)]));
    }

    #[test]
    fn unequal_subscriptions_get_only_their_topics_and_stay_balanced_where_possible() {
        let members = [
            member("a", &["x", "y"], &[], -1),
            member("b", &["y"], &[], -1),
        ];
        let out = run(&members, &[("x", 2), ("y", 2)]);
        assert_eq!(
            owned_of(&out, "a").iter().filter(|tp| tp.0 == "x").count(),
            2
        );
        assert!(!out["b"].contains_key("x"));
        assert_eq!(out["b"]["y"].len(), 2);
    }

    #[test]
    fn never_assigns_a_partition_owned_by_another_member_in_the_same_round() {
        // Everything owned by one member, three new ones: 9 of 12 must move, none may
        // show up in a newcomer's assignment this round.
        let owned: Vec<(&str, i32)> = (0..12).map(|p| ("t", p)).collect();
        let members = [
            member("a", &["t"], &owned, 1),
            member("b", &["t"], &[], -1),
            member("c", &["t"], &[], -1),
            member("d", &["t"], &[], -1),
        ];
        let out = run(&members, &[("t", 12)]);
        assert_eq!(owned_of(&out, "a").len(), 3);
        for id in ["b", "c", "d"] {
            assert!(owned_of(&out, id).is_empty(), "{id}");
        }
    }
}
