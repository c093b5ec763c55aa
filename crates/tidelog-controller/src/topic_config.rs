//! The catalogue of topic-level configs tidelog supports, with Kafka's names, types,
//! defaults and validation rules, and the broker-level keys that set their defaults.
//!
//! `compression.type` is accepted and stored, but tidelog stores record batches as the
//! producer sent them (no broker-side recompression); `producer` is the only value that
//! changes nothing, the others are kept for DescribeConfigs and future use.
//! `segment.bytes` allows values down to 14 bytes as Kafka 3.x did (Kafka 4 raised the
//! minimum to 1 MiB), so small segments can be used in tests.

use crate::error::TopicError;

/// Kafka's config types; `kafka_code` is the `config_type` of DescribeConfigs v3+.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl ConfigType {
    pub fn kafka_code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Rule {
    LongAtLeast(i64),
    IntAtLeast(i32),
    Boolean,
    OneOf(&'static [&'static str]),
    /// A comma-separated list of distinct items from the set; empty if `allow_empty`.
    ListOf(&'static [&'static str], bool),
    IntBetween(i32, i32),
    /// An int in the range, or -1 (the codec's own default).
    IntBetweenOrDefault(i32, i32),
    DoubleBetween(f64, f64),
    /// `*`, or `partition:broker` pairs separated by commas (throttled replicas).
    ReplicaList,
    /// Only this value: the feature it would turn on does not exist here.
    Unsupported {
        value: &'static str,
        why: &'static str,
    },
}

/// One supported topic config.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// Kafka's default, as DescribeConfigs shows it.
    pub default: &'static str,
    /// The broker-level key whose value, when set, is this config's default; empty
    /// where Kafka has none.
    pub broker_key: &'static str,
    pub doc: &'static str,
    rule: Rule,
}

/// What DescribeConfigs needs to know about one config beyond its current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntryInfo {
    pub name: &'static str,
    pub default: &'static str,
    pub is_sensitive: bool,
    pub config_type: ConfigType,
    pub doc: &'static str,
}

const CLEANUP_POLICIES: &[&str] = &["delete", "compact"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const LONG_MAX: &str = "9223372036854775807";
const TIERED: &str = "tiered storage is not supported by tidelog";

const fn def(
    name: &'static str,
    config_type: ConfigType,
    default: &'static str,
    broker_key: &'static str,
    rule: Rule,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        config_type,
        default,
        broker_key,
        doc,
        rule,
    }
}

use ConfigType as T;

static CONFIGS: &[ConfigDef] = &[
    def("cleanup.policy", T::List, "delete", "log.cleanup.policy", Rule::ListOf(CLEANUP_POLICIES, true),
        "\"delete\" removes old segments by time or size; \"compact\" keeps the newest record per key; both may be combined; empty (Kafka 4) keeps everything."),
    def("compression.gzip.level", T::Int, "-1", "compression.gzip.level", Rule::IntBetweenOrDefault(1, 9),
        "Accepted and stored; tidelog does not recompress (see compression.type)."),
    def("compression.lz4.level", T::Int, "9", "compression.lz4.level", Rule::IntBetween(1, 17),
        "Accepted and stored; tidelog does not recompress (see compression.type)."),
    def("compression.type", T::String, "producer", "compression.type", Rule::OneOf(COMPRESSION_TYPES),
        "Accepted and stored; tidelog keeps batches compressed as the producer sent them."),
    def("compression.zstd.level", T::Int, "3", "compression.zstd.level", Rule::IntBetween(-131072, 22),
        "Accepted and stored; tidelog does not recompress (see compression.type)."),
    def("delete.retention.ms", T::Long, "86400000", "log.cleaner.delete.retention.ms", Rule::LongAtLeast(0),
        "How long tombstones of a compacted topic are kept."),
    def("errors.deadletterqueue.group.enable", T::Boolean, "false", "", Rule::Boolean,
        "Whether a share group may use this topic as its dead-letter topic (KIP-1191)."),
    def("file.delete.delay.ms", T::Long, "60000", "log.segment.delete.delay.ms", Rule::LongAtLeast(0),
        "How long a deleted or replaced partition directory, renamed to <name>.<id>-delete, waits before its files are removed."),
    def("flush.messages", T::Long, LONG_MAX, "log.flush.interval.messages", Rule::LongAtLeast(1),
        "Fsync the log after this many messages; 1 fsyncs every batch."),
    def("flush.ms", T::Long, LONG_MAX, "log.flush.interval.ms", Rule::LongAtLeast(0),
        "Fsync the log when this much time has passed since the last fsync."),
    def("follower.replication.throttled.replicas", T::List, "", "", Rule::ReplicaList,
        "Accepted and stored; the broker-wide follower.replication.throttled.rate throttles every follower fetch."),
    def("index.interval.bytes", T::Int, "4096", "log.index.interval.bytes", Rule::IntAtLeast(0),
        "Bytes of log between two entries of the offset index."),
    def("leader.replication.throttled.replicas", T::List, "", "", Rule::ReplicaList,
        "Accepted and stored; leaders do not throttle (the follower side does)."),
    def("local.retention.bytes", T::Long, "-2", "log.local.retention.bytes", Rule::LongAtLeast(-2),
        "Tiered storage only; accepted with its default meaning (the same as retention.bytes)."),
    def("local.retention.ms", T::Long, "-2", "log.local.retention.ms", Rule::LongAtLeast(-2),
        "Tiered storage only; accepted with its default meaning (the same as retention.ms)."),
    def("max.compaction.lag.ms", T::Long, LONG_MAX, "log.cleaner.max.compaction.lag.ms", Rule::LongAtLeast(1),
        "Longest a record stays uncompacted: the active segment is rolled and compacted once its oldest record is this old, whatever the dirty ratio."),
    def("max.message.bytes", T::Int, "1048588", "message.max.bytes", Rule::IntAtLeast(0),
        "Largest record batch the topic accepts."),
    def("message.timestamp.after.max.ms", T::Long, "3600000", "log.message.timestamp.after.max.ms", Rule::LongAtLeast(0),
        "With CreateTime, records timestamped more than this far in the future are refused (INVALID_TIMESTAMP)."),
    def("message.timestamp.before.max.ms", T::Long, LONG_MAX, "log.message.timestamp.before.max.ms", Rule::LongAtLeast(0),
        "With CreateTime, records timestamped more than this far in the past are refused (INVALID_TIMESTAMP)."),
    def("message.timestamp.type", T::String, "CreateTime", "log.message.timestamp.type", Rule::OneOf(TIMESTAMP_TYPES),
        "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's clock."),
    def("min.cleanable.dirty.ratio", T::Double, "0.5", "log.cleaner.min.cleanable.ratio", Rule::DoubleBetween(0.0, 1.0),
        "A compacted log is cleaned when this share of its cleanable bytes is not yet compacted (or max.compaction.lag.ms forces it)."),
    def("min.compaction.lag.ms", T::Long, "0", "log.cleaner.min.compaction.lag.ms", Rule::LongAtLeast(0),
        "Minimum age of a record before compaction may remove it."),
    def("min.insync.replicas", T::Int, "1", "min.insync.replicas", Rule::IntAtLeast(1),
        "Fewest in-sync replicas for an acks=all write to succeed; below it (capped at the replica count) the high watermark stands still, so nothing new is served or acknowledged until the ISR grows back (Kafka 4's strict min-ISR rule)."),
    def("preallocate", T::Boolean, "false", "log.preallocate", Rule::Boolean,
        "Accepted and stored; segment files grow as they are written."),
    def("remote.log.copy.disable", T::Boolean, "false", "", Rule::Unsupported { value: "false", why: TIERED },
        "Tiered storage is not supported: only false is accepted."),
    def("remote.log.delete.on.disable", T::Boolean, "false", "", Rule::Unsupported { value: "false", why: TIERED },
        "Tiered storage is not supported: only false is accepted."),
    def("remote.storage.enable", T::Boolean, "false", "", Rule::Unsupported { value: "false", why: TIERED },
        "Tiered storage is not supported: only false is accepted."),
    def("retention.bytes", T::Long, "-1", "log.retention.bytes", Rule::LongAtLeast(-1),
        "Maximum size of a partition before old segments are deleted; -1 means no limit."),
    def("retention.ms", T::Long, "604800000", "log.retention.ms", Rule::LongAtLeast(-1),
        "Maximum age of a segment's newest record before the segment is deleted; -1 means forever."),
    def("segment.bytes", T::Int, "1073741824", "log.segment.bytes", Rule::IntAtLeast(14),
        "Size at which a new segment is rolled."),
    def("segment.index.bytes", T::Int, "10485760", "log.index.size.max.bytes", Rule::IntAtLeast(4),
        "Maximum size of a segment's offset and time index."),
    def("segment.jitter.ms", T::Long, "0", "log.roll.jitter.ms", Rule::LongAtLeast(0),
        "Up to this much is taken off segment.ms for each segment (a fixed share per segment), so partitions created together do not all roll at once."),
    def("segment.ms", T::Long, "604800000", "log.roll.ms", Rule::LongAtLeast(1),
        "Age at which a new segment is rolled even if not full."),
    def("unclean.leader.election.enable", T::Boolean, "false", "unclean.leader.election.enable", Rule::Boolean,
        "Whether a replica outside the ISR may become leader, at the cost of losing acknowledged records."),
];

/// Every supported topic config, sorted by name.
pub fn all() -> &'static [ConfigDef] {
    CONFIGS
}

pub fn find(name: &str) -> Option<&'static ConfigDef> {
    CONFIGS.iter().find(|d| d.name == name)
}

pub fn describe(name: &str) -> Option<ConfigEntryInfo> {
    find(name).map(|d| ConfigEntryInfo {
        name: d.name,
        default: d.default,
        is_sensitive: false,
        config_type: d.config_type,
        doc: d.doc,
    })
}

/// The topic config a broker-level key sets the default of (`log.retention.ms` ->
/// `retention.ms`), or `None` if the key is not such a default.
pub fn topic_default_for_broker_key(broker_key: &str) -> Option<&'static str> {
    CONFIGS
        .iter()
        .find(|d| !d.broker_key.is_empty() && d.broker_key == broker_key)
        .map(|d| d.name)
}

/// The broker-level key that sets the default of a topic config (the reverse mapping,
/// for DescribeConfigs synonyms).
pub fn broker_key_for_topic_config(name: &str) -> Option<&'static str> {
    find(name).map(|d| d.broker_key).filter(|k| !k.is_empty())
}

/// An INT within `low..=high`, or -1 ("the codec's default") when `minus_one_ok`.
fn int_between(text: &str, low: i32, high: i32, minus_one_ok: bool) -> Result<(), String> {
    let v: i32 = text
        .parse()
        .map_err(|_| "Not a number of type INT".to_string())?;
    if (minus_one_ok && v == -1) || (low..=high).contains(&v) {
        Ok(())
    } else {
        Err(format!("Value must be between {low} and {high}"))
    }
}

/// Checks a value for a topic config. Unknown names and bad values are `InvalidConfig`.
pub fn validate(name: &str, value: &str) -> Result<(), TopicError> {
    let def = find(name)
        .ok_or_else(|| TopicError::InvalidConfig(format!("Unknown topic config name: {name}")))?;
    let bad = |why: String| {
        TopicError::InvalidConfig(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    let trimmed = value.trim();
    match def.rule {
        Rule::LongAtLeast(min) => {
            let v: i64 = trimmed
                .parse()
                .map_err(|_| bad("Not a number of type LONG".into()))?;
            if v < min {
                return Err(bad(format!("Value must be at least {min}")));
            }
        }
        Rule::IntAtLeast(min) => {
            let v: i32 = trimmed
                .parse()
                .map_err(|_| bad("Not a number of type INT".into()))?;
            if v < min {
                return Err(bad(format!("Value must be at least {min}")));
            }
        }
        Rule::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err(bad("Expected value to be either true or false".into()));
            }
        }
        Rule::OneOf(allowed) => {
            if !allowed.contains(&trimmed) {
                return Err(bad(format!(
                    "String must be one of: {}",
                    allowed.join(", ")
                )));
            }
        }
        Rule::ListOf(allowed, allow_empty) => {
            if trimmed.is_empty() {
                if allow_empty {
                    return Ok(());
                }
                return Err(bad("The list must not be empty".into()));
            }
            let items: Vec<&str> = trimmed.split(',').map(str::trim).collect();
            if items.iter().any(|i| !allowed.contains(i)) {
                return Err(bad(format!(
                    "Each item must be one of: {}",
                    allowed.join(", ")
                )));
            }
            if (1..items.len()).any(|i| items[..i].contains(&items[i])) {
                return Err(bad("Items must not repeat".into()));
            }
        }
        Rule::IntBetween(low, high) => int_between(trimmed, low, high, false).map_err(bad)?,
        Rule::IntBetweenOrDefault(low, high) => {
            int_between(trimmed, low, high, true).map_err(bad)?
        }
        Rule::DoubleBetween(low, high) => {
            let v: f64 = trimmed
                .parse()
                .map_err(|_| bad("Not a number of type DOUBLE".into()))?;
            if !(low..=high).contains(&v) {
                return Err(bad(format!("Value must be between {low} and {high}")));
            }
        }
        Rule::ReplicaList => {
            let pair = |item: &str| {
                let (p, b) = item.split_once(':')?;
                p.trim().parse::<i32>().ok()?;
                b.trim().parse::<i32>().ok()
            };
            let ok = trimmed.is_empty()
                || trimmed == "*"
                || trimmed.split(',').all(|item| pair(item.trim()).is_some());
            if !ok {
                return Err(bad(
                    "Must be *, or a list of partition:broker pairs such as 0:101,1:102".into(),
                ));
            }
        }
        Rule::Unsupported { value: only, why } => {
            if !trimmed.eq_ignore_ascii_case(only) {
                return Err(bad(format!("{why}; only {only} is accepted")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_sorted_unique_and_defaults_validate() {
        for pair in CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} / {}",
                pair[0].name,
                pair[1].name
            );
        }
        for d in CONFIGS {
            validate(d.name, d.default).unwrap_or_else(|e| panic!("default of {}: {e}", d.name));
            if !d.broker_key.is_empty() {
                assert_eq!(topic_default_for_broker_key(d.broker_key), Some(d.name));
            }
        }
    }

    #[test]
    fn broker_keys_map_to_topic_configs() {
        assert_eq!(
            topic_default_for_broker_key("log.retention.ms"),
            Some("retention.ms")
        );
        assert_eq!(
            topic_default_for_broker_key("log.segment.bytes"),
            Some("segment.bytes")
        );
        assert_eq!(
            topic_default_for_broker_key("log.roll.ms"),
            Some("segment.ms")
        );
        assert_eq!(
            topic_default_for_broker_key("message.max.bytes"),
            Some("max.message.bytes")
        );
        assert_eq!(
            topic_default_for_broker_key("log.flush.interval.messages"),
            Some("flush.messages")
        );
        assert_eq!(
            topic_default_for_broker_key("log.segment.delete.delay.ms"),
            Some("file.delete.delay.ms")
        );
        assert_eq!(topic_default_for_broker_key("num.partitions"), None);
        assert_eq!(
            broker_key_for_topic_config("flush.ms"),
            Some("log.flush.interval.ms")
        );
    }

    #[test]
    fn values_are_checked_by_type_and_range() {
        validate("retention.ms", "-1").unwrap();
        validate("retention.ms", " 1000 ").unwrap();
        assert_eq!(validate("retention.ms", "-2").unwrap_err().error_code(), 40);
        assert_eq!(
            validate("retention.ms", "soon").unwrap_err().error_code(),
            40
        );
        validate("segment.bytes", "14").unwrap();
        assert!(validate("segment.bytes", "13").is_err());
        assert!(
            validate("segment.bytes", "4294967296").is_err(),
            "INT overflows"
        );
        validate("cleanup.policy", "compact,delete").unwrap();
        validate("cleanup.policy", "delete, compact").unwrap();
        assert!(validate("cleanup.policy", "compact,compact").is_err());
        validate("cleanup.policy", "").unwrap();
        validate("min.cleanable.dirty.ratio", "0.1").unwrap();
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        validate("compression.gzip.level", "-1").unwrap();
        assert!(validate("compression.gzip.level", "0").is_err());
        validate("leader.replication.throttled.replicas", "*").unwrap();
        validate("leader.replication.throttled.replicas", "0:1, 1:2").unwrap();
        assert!(validate("leader.replication.throttled.replicas", "0-1").is_err());
        validate("remote.storage.enable", "false").unwrap();
        let refused = validate("remote.storage.enable", "true").unwrap_err();
        assert_eq!(refused.error_code(), 40);
        assert!(refused.to_string().contains("tiered storage"), "{refused}");
        assert!(validate("cleanup.policy", "shred").is_err());
        validate("message.timestamp.type", "LogAppendTime").unwrap();
        assert!(validate("message.timestamp.type", "logappendtime").is_err());
        validate("unclean.leader.election.enable", "TRUE").unwrap();
        assert!(validate("unclean.leader.election.enable", "yes").is_err());
        validate("compression.type", "zstd").unwrap();
        assert!(validate("compression.type", "brotli").is_err());
        assert!(validate("min.insync.replicas", "0").is_err());
        assert!(validate("flush.messages", "0").is_err());
        let err = validate("no.such.config", "1").unwrap_err();
        assert!(matches!(err, TopicError::InvalidConfig(_)));
    }

    #[test]
    fn describe_reports_type_and_default() {
        let info = describe("retention.ms").unwrap();
        assert_eq!(info.default, "604800000");
        assert_eq!(info.config_type.kafka_code(), 5);
        assert!(!info.is_sensitive);
        assert!(describe("nope").is_none());
    }
}
