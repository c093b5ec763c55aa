//! Which partition of an internal topic owns a key (group id or transactional id).
//!
//! Kafka's rule, kept bit for bit so operators and tools agree on placement:
//! `Utils.abs(group.hashCode()) % partitions`, where `hashCode` is Java's
//! `String.hashCode` (over UTF-16 code units, `h = 31*h + c` with 32-bit wrap-around)
//! and `Utils.abs(i)` is `i & 0x7fffffff` (so `i32::MIN` maps to 0, not to itself).

/// Java's `String.hashCode` of `s`.
pub(crate) fn java_string_hashcode(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The partition (of `partitions`) that stores `key`'s records; 0 when there are none.
pub(crate) fn partition_for(key: &str, partitions: i32) -> i32 {
    if partitions <= 0 {
        return 0;
    }
    (java_string_hashcode(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_string_hashcode() {
        // Values computed by the JVM's String.hashCode.
        assert_eq!(java_string_hashcode(""), 0);
        assert_eq!(java_string_hashcode("a"), 97);
        assert_eq!(java_string_hashcode("hello"), 99_162_322);
        assert_eq!(java_string_hashcode("my-group"), -1_906_497_762);
        // Wraps around: "polygenelubricants" hashes to i32::MIN in Java.
        assert_eq!(java_string_hashcode("polygenelubricants"), i32::MIN);
        // Non-BMP characters count as two UTF-16 units.
        assert_eq!(java_string_hashcode("\u{1F600}"), 55357 * 31 + 56832);
    }

    #[test]
    fn partition_uses_kafka_abs() {
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // Negative hash: the sign bit is masked off, not negated.
        assert_eq!(partition_for("my-group", 50), 240_985_886 % 50);
        assert_eq!(partition_for("x", 0), 0);
        for name in ["a", "b", "group-1", "üñí"] {
            let p = partition_for(name, 50);
            assert!((0..50).contains(&p));
        }
    }
}
