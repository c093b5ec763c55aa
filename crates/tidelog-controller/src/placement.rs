//! Where new partitions' replicas go: round-robin over the live brokers.

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
}
