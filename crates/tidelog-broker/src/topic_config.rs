//! A topic's effective configuration: its own overrides over the broker's `log.*`
//! defaults (dynamic or static, as `crate::dynamic_config::resolve` made the broker's
//! view) over the built-in defaults, and its translation into storage settings.

use std::collections::BTreeMap;

use tidelog_controller::topic_config;
use tidelog_storage::{CleanupPolicy, LogConfig, TimestampType};

use crate::config::BrokerConfig;

/// Where an effective value came from, as DescribeConfigs reports it (Kafka's
/// `ConfigSource` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigSource {
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG).
    Topic = 1,
    /// A dynamic config of this broker (DYNAMIC_BROKER_CONFIG).
    DynamicBroker = 2,
    /// The cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    DynamicDefault = 3,
    /// Set in the broker's configuration (STATIC_BROKER_CONFIG).
    Broker = 4,
    /// Nobody set it (DEFAULT_CONFIG).
    Default = 5,
    /// A logger's level (DYNAMIC_BROKER_LOGGER_CONFIG).
    DynamicBrokerLogger = 6,
    /// Set on the group (GROUP_CONFIG, KIP-848).
    Group = 8,
}

/// Every topic setting with its value and source.
pub(crate) fn effective(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, (String, ConfigSource)> {
    let mut out: BTreeMap<String, (String, ConfigSource)> = topic_config::all()
        .iter()
        .map(|def| {
            (
                def.name.to_string(),
                (def.default.to_string(), ConfigSource::Default),
            )
        })
        .collect();
    for (broker_key, value) in broker.all() {
        if let Some(topic_key) = topic_config::topic_default_for_broker_key(broker_key) {
            let source = broker.source(broker_key);
            out.insert(topic_key.to_string(), (value.to_string(), source));
        }
    }
    for (k, v) in overrides {
        out.insert(k.clone(), (v.clone(), ConfigSource::Topic));
    }
    out
}

/// The storage settings for a partition of a topic with these overrides.
pub(crate) fn log_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let values = effective(broker, overrides);
    let int = |name: &str, fallback: i64| -> i64 {
        values
            .get(name)
            .and_then(|(v, _)| v.trim().parse::<i64>().ok())
            .unwrap_or(fallback)
    };
    let defaults = LogConfig::default();
    let unsigned = |name: &str, fallback: u64| -> u64 {
        let v = int(name, -1);
        if v < 0 {
            fallback
        } else {
            v as u64
        }
    };
    // An empty list (Kafka 4) neither deletes nor compacts: the log is kept whole.
    let policy = values
        .get("cleanup.policy")
        .map(|(v, _)| v.as_str())
        .unwrap_or("delete");
    LogConfig {
        segment_bytes: unsigned("segment.bytes", defaults.segment_bytes),
        segment_ms: int("segment.ms", defaults.segment_ms),
        segment_index_bytes: unsigned("segment.index.bytes", defaults.segment_index_bytes),
        index_interval_bytes: unsigned("index.interval.bytes", defaults.index_interval_bytes),
        retention_ms: int("retention.ms", defaults.retention_ms),
        retention_bytes: int("retention.bytes", defaults.retention_bytes),
        flush_messages: unsigned("flush.messages", defaults.flush_messages),
        flush_ms: unsigned("flush.ms", defaults.flush_ms),
        cleanup_policy: CleanupPolicy {
            delete: policy.split(',').any(|p| p.trim() == "delete"),
            compact: policy.split(',').any(|p| p.trim() == "compact"),
        },
        delete_retention_ms: int("delete.retention.ms", defaults.delete_retention_ms),
        min_compaction_lag_ms: int("min.compaction.lag.ms", defaults.min_compaction_lag_ms),
        max_message_bytes: u32::try_from(int(
            "max.message.bytes",
            i64::from(defaults.max_message_bytes),
        ))
        .unwrap_or(defaults.max_message_bytes),
        message_timestamp_type: match values
            .get("message.timestamp.type")
            .map(|(v, _)| v.as_str())
        {
            Some("LogAppendTime") => TimestampType::LogAppendTime,
            _ => TimestampType::CreateTime,
        },
        message_timestamp_before_max_ms: int(
            "message.timestamp.before.max.ms",
            defaults.message_timestamp_before_max_ms,
        ),
        message_timestamp_after_max_ms: int(
            "message.timestamp.after.max.ms",
            defaults.message_timestamp_after_max_ms,
        ),
        max_compaction_lag_ms: int("max.compaction.lag.ms", defaults.max_compaction_lag_ms),
        min_cleanable_dirty_ratio: values
            .get("min.cleanable.dirty.ratio")
            .and_then(|(v, _)| v.trim().parse::<f64>().ok())
            .filter(|r| (0.0..=1.0).contains(r))
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
        segment_jitter_ms: int("segment.jitter.ms", defaults.segment_jitter_ms),
        file_delete_delay_ms: unsigned("file.delete.delay.ms", defaults.file_delete_delay_ms),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn broker_defaults_of_the_kafka_4_topic_configs_reach_the_log_and_topics_override_them() {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let mut broker = BrokerConfig::new(1, any, any, PathBuf::from("/tmp/x"));
        let defaults = log_config(&broker, &BTreeMap::new());
        assert_eq!(defaults.message_timestamp_after_max_ms, 3_600_000);
        assert_eq!(defaults.min_cleanable_dirty_ratio, 0.5);
        for (name, value) in [
            ("log.message.timestamp.after.max.ms", "60000"),
            ("log.cleaner.min.cleanable.ratio", "0.25"),
            ("log.cleaner.max.compaction.lag.ms", "120000"),
            ("log.roll.jitter.ms", "5000"),
        ] {
            broker.set(name, value).expect("a known setting");
        }
        let from_broker = log_config(&broker, &BTreeMap::new());
        assert_eq!(from_broker.message_timestamp_after_max_ms, 60_000);
        assert_eq!(from_broker.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(from_broker.max_compaction_lag_ms, 120_000);
        assert_eq!(from_broker.segment_jitter_ms, 5_000);
        let overrides = BTreeMap::from([
            ("min.cleanable.dirty.ratio".to_string(), "0.9".to_string()),
            ("cleanup.policy".to_string(), String::new()),
        ]);
        let topic = log_config(&broker, &overrides);
        assert_eq!(topic.min_cleanable_dirty_ratio, 0.9);
        assert!(!topic.cleanup_policy.delete && !topic.cleanup_policy.compact);
        let effective = effective(&broker, &overrides);
        assert_eq!(
            effective.get("segment.jitter.ms"),
            Some(&("5000".to_string(), ConfigSource::Broker))
        );
    }
}
