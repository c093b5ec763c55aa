//! Key-to-partition mapping compatible with the Kafka Java client's default partitioner, so a
//! key lands on the same partition whichever client (Java, librdkafka with
//! `partitioner=murmur2_random`, kafka-python, tidelog) wrote it.

/// The 32-bit MurmurHash2 variant used by Kafka's Java client (`Utils.murmur2`), seed
/// `0x9747b28c`, little-endian 4-byte blocks. Returned as the signed value Java computes.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java xors the seed with the length as an `int`; truncation matches it for any slice
    // a Kafka record can hold.
    let mut h: u32 = SEED ^ (data.len() as u32);
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `i32::MIN`).
pub fn to_positive(h: i32) -> i32 {
    h & 0x7fff_ffff
}

/// The partition a keyed record goes to: `toPositive(murmur2(key)) % partitions`.
/// Returns `None` when the topic has no partitions.
pub fn partition_for_key(key: &[u8], partitions: i32) -> Option<i32> {
    if partitions <= 0 {
        return None;
    }
    Some(to_positive(murmur2(key)) % partitions)
}

/// Chooses partitions for keyless records: one partition is used for a whole flush ("sticky",
/// so keyless records form full batches), and the next flush moves on to the next partition.
#[derive(Debug, Default)]
pub(crate) struct StickyPartitioner {
    next: u32,
    current: Option<i32>,
}

impl StickyPartitioner {
    /// The partition for a keyless record in the current flush.
    pub(crate) fn partition(&mut self, partitions: i32) -> Option<i32> {
        if partitions <= 0 {
            return None;
        }
        match self.current {
            Some(p) if p < partitions => Some(p),
            _ => {
                let p = (self.next % partitions as u32) as i32;
                self.next = self.next.wrapping_add(1);
                self.current = Some(p);
                Some(p)
            }
        }
    }

    /// Called after a flush: the next keyless record starts a batch on another partition.
    pub(crate) fn rotate(&mut self) {
        self.current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_the_java_client_vectors() {
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b""), 275_646_681);
    }

    #[test]
    fn murmur2_covers_every_tail_length() {
        // Different tail lengths must take different paths and give different hashes.
        let hashes: Vec<i32> = (0..8).map(|n| murmur2(&b"abcdefgh"[..n])).collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(-1), 0x7fff_ffff);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn keyed_partition_is_positive_hash_modulo_count() {
        let expected = (-790_332_482_i32 & 0x7fff_ffff) % 7;
        assert_eq!(partition_for_key(b"foobar", 7), Some(expected));
        assert_eq!(partition_for_key(b"foobar", 1), Some(0));
        assert_eq!(partition_for_key(b"foobar", 0), None);
        for n in 1..50 {
            let p = partition_for_key(b"some-key", n).unwrap();
            assert!((0..n).contains(&p));
        }
    }

    #[test]
    fn sticky_partitioner_sticks_within_a_flush_and_rotates_after() {
        let mut s = StickyPartitioner::default();
        let first = s.partition(3).unwrap();
        assert_eq!(s.partition(3), Some(first));
        s.rotate();
        let second = s.partition(3).unwrap();
        assert_ne!(first, second);
        s.rotate();
        let third = s.partition(3).unwrap();
        s.rotate();
        assert_eq!(s.partition(3), Some(first));
        assert_ne!(third, second);
        assert_eq!(s.partition(0), None);
    }
}
