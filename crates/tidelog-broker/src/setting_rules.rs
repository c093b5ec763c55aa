//! The values each broker setting accepts, checked at start-up with Kafka's rules: a
//! setting that is the broker-wide default of a topic config (`log.segment.bytes` for
//! `segment.bytes`) follows that config's rule, so the broker and a topic refuse the
//! same values; the others have Kafka's lower bounds. A bad value stops start-up naming
//! the setting, the value and where it came from (`crate::config::ConfigError`).

use tidelog_controller::topic_config;

use crate::settings;

/// Lower bounds of the integer settings that are not topic defaults (Kafka's
/// `atLeast(..)` validators).
const AT_LEAST: &[(&str, i64)] = &[
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("log.retention.check.interval.ms", 1),
    ("log.flush.scheduler.interval.ms", 0),
    ("background.threads", 1),
    ("log.cleaner.backoff.ms", 0),
    ("socket.request.max.bytes", 1),
    ("queued.max.requests", 1),
    ("max.connections", 0),
    ("quota.window.num", 1),
    ("quota.window.size.seconds", 1),
    ("offsets.topic.num.partitions", 1),
    ("offsets.topic.replication.factor", 1),
    ("offsets.topic.segment.bytes", 1),
    ("offsets.retention.minutes", 1),
    ("offsets.retention.check.interval.ms", 1),
    ("offsets.commit.timeout.ms", 1),
    ("offset.metadata.max.bytes", 0),
    ("producer.id.expiration.ms", 1),
    ("transaction.state.log.num.partitions", 1),
    ("transaction.state.log.replication.factor", 1),
    ("transaction.max.timeout.ms", 1),
    ("transactional.id.expiration.ms", 1),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        1,
    ),
    ("group.initial.rebalance.delay.ms", 0),
    ("group.min.session.timeout.ms", 0),
    ("group.max.session.timeout.ms", 0),
    ("group.max.size", 1),
    ("group.consumer.session.timeout.ms", 1),
    ("group.consumer.heartbeat.interval.ms", 1),
    ("group.consumer.min.session.timeout.ms", 1),
    ("group.consumer.max.session.timeout.ms", 1),
    ("group.consumer.min.heartbeat.interval.ms", 1),
    ("group.consumer.max.heartbeat.interval.ms", 1),
    ("group.consumer.max.size", 1),
    ("group.share.session.timeout.ms", 1),
    ("group.share.heartbeat.interval.ms", 1),
    ("group.share.max.size", 1),
    // Kafka's bounds: 1 s to 1 h, 2 to 10 deliveries, 100 to 10000 locks.
    ("group.share.record.lock.duration.ms", 1000),
    ("group.share.delivery.count.limit", 2),
    ("group.share.partition.max.record.locks", 100),
    ("group.share.max.share.sessions", 1),
    ("group.share.min.session.timeout.ms", 1),
    ("group.share.max.session.timeout.ms", 1),
    ("group.share.min.heartbeat.interval.ms", 1),
    ("group.share.max.heartbeat.interval.ms", 1),
    ("group.share.min.record.lock.duration.ms", 1000),
    ("group.share.max.record.lock.duration.ms", 1000),
    ("group.share.min.delivery.count.limit", 2),
    ("group.share.max.delivery.count.limit", 2),
    ("group.share.min.partition.max.record.locks", 100),
    ("group.share.max.partition.max.record.locks", 100),
    ("share.coordinator.state.topic.num.partitions", 1),
    ("share.coordinator.state.topic.replication.factor", 1),
    ("share.coordinator.state.topic.segment.bytes", 1),
    ("replica.lag.time.max.ms", 0),
    ("replica.fetch.max.bytes", 0),
    ("replica.fetch.response.max.bytes", 0),
    ("replica.fetch.wait.max.ms", 0),
    ("replica.fetch.backoff.ms", 0),
    ("replica.high.watermark.checkpoint.interval.ms", 0),
    ("follower.replication.throttled.rate", 1),
    ("broker.session.timeout.ms", 1),
    ("broker.heartbeat.interval.ms", 1),
    ("controlled.shutdown.max.wait.ms", 0),
    ("leader.imbalance.check.interval.seconds", 1),
    ("leader.imbalance.per.broker.percentage", 0),
    ("controller.quorum.request.timeout.ms", 0),
    ("admin.console.lag.history.interval.ms", 100),
];

/// Why `value` is not acceptable for the tidelog setting `name`, if it is not.
pub(crate) fn check(name: &str, value: &str) -> Result<(), String> {
    if name == settings::AUTHORIZER_CLASS_NAME.name {
        return crate::auth::check_authorizer_class(value);
    }
    if name == settings::ADMIN_LISTENER_SECURITY_PROTOCOL.name {
        return crate::admin_auth::AdminProtocol::parse(value).map(|_| ());
    }
    if name == settings::ADMIN_PUBLIC_PATHS.name {
        return crate::admin_auth::public_paths(value).map(|_| ());
    }
    if name == settings::GROUP_CONSUMER_MIGRATION_POLICY.name {
        return crate::group::migration_policy(value).map(|_| ());
    }
    if let Some(topic) = topic_config::topic_default_for_broker_key(name) {
        return topic_config::validate(topic, value).map_err(|e| match e {
            tidelog_controller::TopicError::InvalidConfig(why) => why,
            other => other.to_string(),
        });
    }
    if let Some((_, min)) = AT_LEAST.iter().find(|(n, _)| *n == name) {
        let v: i64 = value.trim().parse().map_err(|_| "expected an integer")?;
        if v < *min {
            return Err(format!("must be at least {min}"));
        }
    }
    Ok(())
}

/// Pairs of settings whose values must agree, as Kafka checks them at start-up: the
/// first must not exceed the second.
pub(crate) const ORDERED: &[(settings::Setting<i64>, settings::Setting<i64>)] = &[
    (
        settings::GROUP_MIN_SESSION_TIMEOUT_MS,
        settings::GROUP_MAX_SESSION_TIMEOUT_MS,
    ),
    // Kafka's GroupCoordinatorConfig: each bound in order, the value between them.
    (
        settings::GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS,
        settings::GROUP_CONSUMER_SESSION_TIMEOUT_MS,
    ),
    (
        settings::GROUP_CONSUMER_SESSION_TIMEOUT_MS,
        settings::GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS,
    ),
    (
        settings::GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS,
        settings::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
    ),
    (
        settings::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
        settings::GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS,
    ),
    // Kafka's ShareGroupConfig: the same for share groups.
    (
        settings::GROUP_SHARE_MIN_SESSION_TIMEOUT_MS,
        settings::GROUP_SHARE_SESSION_TIMEOUT_MS,
    ),
    (
        settings::GROUP_SHARE_SESSION_TIMEOUT_MS,
        settings::GROUP_SHARE_MAX_SESSION_TIMEOUT_MS,
    ),
    (
        settings::GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS,
        settings::GROUP_SHARE_HEARTBEAT_INTERVAL_MS,
    ),
    (
        settings::GROUP_SHARE_HEARTBEAT_INTERVAL_MS,
        settings::GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS,
    ),
    (
        settings::GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS,
        settings::GROUP_SHARE_RECORD_LOCK_DURATION_MS,
    ),
    (
        settings::GROUP_SHARE_RECORD_LOCK_DURATION_MS,
        settings::GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS,
    ),
    (
        settings::GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT,
        settings::GROUP_SHARE_DELIVERY_COUNT_LIMIT,
    ),
    (
        settings::GROUP_SHARE_DELIVERY_COUNT_LIMIT,
        settings::GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT,
    ),
    (
        settings::GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS,
        settings::GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS,
    ),
    (
        settings::GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS,
        settings::GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS,
    ),
    (
        settings::REPLICA_FETCH_WAIT_MAX_MS,
        settings::REPLICA_LAG_TIME_MAX_MS,
    ),
    (
        settings::BROKER_HEARTBEAT_INTERVAL_MS,
        settings::BROKER_SESSION_TIMEOUT_MS,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_values_follow_the_topic_rules_and_kafkas_bounds() {
        assert!(check("log.segment.bytes", "1").is_err());
        assert!(check("log.segment.bytes", "1048576").is_ok());
        assert!(check("log.cleanup.policy", "bogus").is_err());
        assert!(check("log.cleanup.policy", "compact,delete").is_ok());
        assert!(check("log.retention.ms", "-2").is_err());
        assert!(check("log.retention.ms", "-1").is_ok());
        assert!(check("num.partitions", "0").is_err());
        assert!(check("num.partitions", "3").is_ok());
        assert!(check("compression.type", "brotli").is_err());
        assert!(check("compression.zstd.level", "23").is_err());
        assert!(check("advertised.host", "anything").is_ok());
        for (name, default, _) in settings::ALL {
            assert_eq!(check(name, default), Ok(()), "the default of {name}");
        }
        for (name, _) in AT_LEAST {
            assert!(
                settings::ALL.iter().any(|(n, _, _)| n == name),
                "{name} is not a setting"
            );
        }
    }
}
