//! The server-side assignors: `uniform` (sticky and balanced: members keep what they
//! have as far as balance allows, so a new member takes only its share) and `range`
//! (per topic, contiguous ranges over the subscribed members in member-id order).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Assignment;

pub(crate) const UNIFORM: &str = "uniform";
pub(crate) const RANGE: &str = "range";

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub(crate) struct AssignMember {
    pub(crate) id: String,
    pub(crate) topics: BTreeSet<Uuid>,
    /// The member's part of the previous target assignment.
    pub(crate) previous: Assignment,
}

/// The new target: every member of `members` (in input order) with its partitions of
/// `topics` (topic id -> partition count).
pub(crate) fn assign(
    assignor: &str,
    members: &[AssignMember],
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    if assignor == RANGE {
        range(members, topics)
    } else {
        uniform(members, topics)
    }
}

fn range(members: &[AssignMember], topics: &BTreeMap<Uuid, i32>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.clone(), Assignment::new()))
        .collect();
    for (topic, count) in topics {
        let mut subscribed: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.id.as_str())
            .collect();
        subscribed.sort_unstable();
        if subscribed.is_empty() {
            continue;
        }
        let count = (*count).max(0);
        let n = subscribed.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribed.iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0 {
                let partitions = (next..next + take).collect();
                if let Some(a) = out.get_mut(*member) {
                    a.insert(*topic, partitions);
                }
            }
            next += take;
        }
    }
    out
}

fn uniform(members: &[AssignMember], topics: &BTreeMap<Uuid, i32>) -> BTreeMap<String, Assignment> {
    let n = members.len();
    let mut held: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); n];
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let exists = |t: &Uuid, p: i32| topics.get(t).is_some_and(|c| p >= 0 && p < *c);
    // Stickiness: what each member had and may still have.
    for (i, m) in members.iter().enumerate() {
        for (topic, partitions) in &m.previous {
            if !m.topics.contains(topic) {
                continue;
            }
            for p in partitions {
                if exists(topic, *p) && taken.insert((*topic, *p)) {
                    held[i].insert((*topic, *p));
                }
            }
        }
    }
    // Everything else to the least-loaded member subscribed to its topic.
    for (topic, count) in topics {
        for p in 0..(*count).max(0) {
            if taken.contains(&(*topic, p)) {
                continue;
            }
            let best = (0..n)
                .filter(|i| members[*i].topics.contains(topic))
                .min_by_key(|i| (held[*i].len(), &members[*i].id));
            if let Some(i) = best {
                held[i].insert((*topic, p));
                taken.insert((*topic, p));
            }
        }
    }
    // Balance: move one partition at a time from the most- to a least-loaded member
    // that may take it, until no move narrows the gap. Each move lowers the spread, so
    // this ends within as many moves as there are partitions.
    let mut budget = taken.len() + 1;
    while budget > 0 {
        budget -= 1;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|a, b| {
            held[*b]
                .len()
                .cmp(&held[*a].len())
                .then_with(|| members[*a].id.cmp(&members[*b].id))
        });
        let mut moved = false;
        'from: for &from in &order {
            for &(topic, p) in held[from].iter().rev() {
                let to = (0..n)
                    .filter(|i| *i != from && members[*i].topics.contains(&topic))
                    .filter(|i| held[*i].len() + 1 < held[from].len())
                    .min_by_key(|i| (held[*i].len(), &members[*i].id));
                if let Some(to) = to {
                    held[from].remove(&(topic, p));
                    held[to].insert((topic, p));
                    moved = true;
                    break 'from;
                }
            }
        }
        if !moved {
            break;
        }
    }
    members
        .iter()
        .zip(held)
        .map(|(m, partitions)| {
            let mut a = Assignment::new();
            for (topic, p) in partitions {
                a.entry(topic).or_default().insert(p);
            }
            (m.id.clone(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[Uuid], previous: Assignment) -> AssignMember {
        AssignMember {
            id: id.to_string(),
            topics: topics.iter().copied().collect(),
            previous,
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn uniform_adds_a_fourth_member_moving_only_its_share() {
        let t = Uuid::from_u128(1);
        let topics: BTreeMap<Uuid, i32> = [(t, 12)].into();
        let three: Vec<AssignMember> = ["a", "b", "c"]
            .iter()
            .map(|id| member(id, &[t], Assignment::new()))
            .collect();
        let first = assign(UNIFORM, &three, &topics);
        assert!(first.values().all(|a| count(a) == 4));
        let mut four: Vec<AssignMember> = three
            .iter()
            .map(|m| member(&m.id, &[t], first[&m.id].clone()))
            .collect();
        four.push(member("d", &[t], Assignment::new()));
        let second = assign(UNIFORM, &four, &topics);
        assert!(second.values().all(|a| count(a) == 3));
        for id in ["a", "b", "c"] {
            let kept = second[id][&t].intersection(&first[id][&t]).count();
            assert_eq!(kept, 3, "{id} keeps three of its four");
        }
        // Every partition has exactly one owner.
        let all: BTreeSet<i32> = second.values().flat_map(|a| a[&t].clone()).collect();
        assert_eq!(all.len(), 12);
    }

    #[test]
    fn uniform_gives_a_leaver_share_to_the_others_only() {
        let t = Uuid::from_u128(1);
        let topics: BTreeMap<Uuid, i32> = [(t, 6)].into();
        let three: Vec<AssignMember> = ["a", "b", "c"]
            .iter()
            .map(|id| member(id, &[t], Assignment::new()))
            .collect();
        let first = assign(UNIFORM, &three, &topics);
        let two = vec![
            member("a", &[t], first["a"].clone()),
            member("b", &[t], first["b"].clone()),
        ];
        let second = assign(UNIFORM, &two, &topics);
        for id in ["a", "b"] {
            assert!(first[id][&t].is_subset(&second[id][&t]));
            assert_eq!(count(&second[id]), 3);
        }
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let topics: BTreeMap<Uuid, i32> = [(t1, 4), (t2, 2)].into();
        let members = vec![
            member("a", &[t1], Assignment::new()),
            member("b", &[t1, t2], Assignment::new()),
        ];
        let out = assign(UNIFORM, &members, &topics);
        assert!(!out["a"].contains_key(&t2));
        assert_eq!(count(&out["a"]) + count(&out["b"]), 6);
        assert_eq!(count(&out["a"]), 3);
    }

    #[test]
    fn range_splits_each_topic_in_member_order() {
        let t = Uuid::from_u128(1);
        let topics: BTreeMap<Uuid, i32> = [(t, 5)].into();
        let members = vec![
            member("b", &[t], Assignment::new()),
            member("a", &[t], Assignment::new()),
        ];
        let out = assign(RANGE, &members, &topics);
        assert_eq!(out["a"][&t], [0, 1, 2].into_iter().collect());
        assert_eq!(out["b"][&t], [3, 4].into_iter().collect());
    }
}
