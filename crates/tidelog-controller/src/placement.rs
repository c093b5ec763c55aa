//! Where new partitions' replicas go: round-robin over the live brokers, spread
//! across racks first when the brokers have racks.

use std::collections::BTreeMap;

/// Replica lists for `count` new partitions over `brokers` (id, rack), ordered by id.
/// Without racks this is [`round_robin`]. With racks, the ring is the brokers taken
/// one rack at a time in turn (so neighbours sit in different racks), partition k is
/// led by ring position `start + k`, and each further replica is the next broker
/// around the ring in a rack the partition does not use yet, or, once every rack is
/// used, the next broker not yet chosen. A broker without a rack counts as its own
/// unnamed rack. Callers guarantee `1 <= replication_factor <= brokers.len()`.
pub(crate) fn place(
    brokers: &[(i32, Option<&str>)],
    count: usize,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    if brokers.iter().all(|(_, rack)| rack.is_none()) {
        let ids: Vec<i32> = brokers.iter().map(|(id, _)| *id).collect();
        return round_robin(&ids, count, replication_factor, start);
    }
    let ring = rack_alternating(brokers);
    let n = ring.len();
    if n == 0 {
        return Vec::new();
    }
    let rf = replication_factor.min(n);
    (0..count)
        .map(|k| {
            let first = (start % n + k % n) % n;
            let mut chosen: Vec<usize> = vec![first];
            while chosen.len() < rf {
                let unused_rack = (1..n)
                    .map(|step| (first + step) % n)
                    .filter(|i| !chosen.contains(i))
                    .find(|i| chosen.iter().all(|c| ring[*c].1 != ring[*i].1));
                let next = unused_rack.or_else(|| {
                    (1..n)
                        .map(|step| (first + step) % n)
                        .find(|i| !chosen.contains(i))
                });
                match next {
                    Some(i) => chosen.push(i),
                    None => break,
                }
            }
            chosen.into_iter().map(|i| ring[i].0).collect()
        })
        .collect()
}

/// Brokers interleaved by rack: the first of each rack, then the second of each, ...
fn rack_alternating<'a>(brokers: &[(i32, Option<&'a str>)]) -> Vec<(i32, Option<&'a str>)> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack.entry(*rack).or_default().push(*id);
    }
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    let mut ring = Vec::with_capacity(brokers.len());
    for i in 0..longest {
        for (rack, ids) in &by_rack {
            if let Some(id) = ids.get(i) {
                ring.push((*id, *rack));
            }
        }
    }
    ring
}

/// Replica lists for `count` new partitions with `replication_factor` replicas each.
/// Partition k's first replica (its preferred leader) is broker
/// `brokers[(start + k) % n]`, and its followers are the next brokers around the ring,
/// so leadership spreads evenly and a rotating `start` spreads it across topics.
/// Callers guarantee `1 <= replication_factor <= brokers.len()`.
pub(crate) fn round_robin(
    brokers: &[i32],
    count: usize,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    if n == 0 {
        return Vec::new();
    }
    (0..count)
        .map(|k| {
            let first = (start % n + k % n) % n;
            (0..replication_factor.min(n))
                .map(|j| brokers[(first + j) % n])
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_leaders_and_never_repeats_a_broker() {
        let got = round_robin(&[1, 2, 3], 4, 2, 1);
        assert_eq!(got, vec![vec![2, 3], vec![3, 1], vec![1, 2], vec![2, 3]]);
        for replicas in round_robin(&[5, 6, 7, 8], 50, 4, 7) {
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 4);
        }
        assert!(round_robin(&[], 3, 1, 0).is_empty());
    }

    #[test]
    fn without_racks_placement_is_round_robin() {
        let brokers = [(1, None), (2, None), (3, None)];
        assert_eq!(place(&brokers, 4, 2, 1), round_robin(&[1, 2, 3], 4, 2, 1));
    }

    #[test]
    fn with_racks_every_partition_spans_as_many_racks_as_it_can() {
        // Racks a: 1, 2, 3; b: 4, 5; c: 6.
        let brokers = [
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("a")),
            (4, Some("b")),
            (5, Some("b")),
            (6, Some("c")),
        ];
        let rack = |id: i32| brokers.iter().find(|(b, _)| *b == id).unwrap().1;
        for rf in 1..=6 {
            let placed = place(&brokers, 12, rf, 5);
            let mut leaders = std::collections::BTreeMap::new();
            for replicas in &placed {
                assert_eq!(replicas.len(), rf);
                let mut ids = replicas.clone();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), rf, "{replicas:?}");
                let racks: std::collections::BTreeSet<_> =
                    replicas.iter().map(|r| rack(*r)).collect();
                assert_eq!(racks.len(), rf.min(3), "{replicas:?}");
                *leaders.entry(replicas[0]).or_insert(0) += 1;
            }
            // 12 partitions over 6 brokers: each leads 2.
            assert!(leaders.values().all(|n| *n == 2), "{leaders:?}");
        }
        assert_eq!(place(&brokers, 1, 3, 0), vec![vec![1, 4, 6]]);
    }
}
