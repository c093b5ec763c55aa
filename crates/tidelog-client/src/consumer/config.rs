//! The consumer's settings, under Kafka's names so that a configuration written for the
//! Java client or librdkafka reads the same here.

use std::time::Duration;

use crate::error::{ClientError, Result};
use crate::fetch::FetchOptions;

/// Where a partition without a committed offset starts (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The log start offset.
    Earliest,
    /// The log end: only records produced from now on (Kafka's default).
    Latest,
    /// No reset: `poll` fails with [`ClientError::InvalidArgument`] naming the partition.
    None,
}

/// Which records a fetch may return (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Everything below the high watermark, aborted transactions included.
    ReadUncommitted,
    /// Only below the last stable offset, and no record of an aborted transaction.
    ReadCommitted,
}

impl IsolationLevel {
    pub(crate) fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// A partition assignor the group leader may run (`partition.assignment.strategy`);
/// the names on the wire are Kafka's, so librdkafka and Java members agree on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentStrategy {
    /// Per topic, consecutive runs of partitions (`range`).
    Range,
    /// All partitions dealt one by one over the members (`roundrobin`).
    RoundRobin,
    /// Balanced and sticky, with incremental cooperative rebalancing (KIP-429,
    /// `cooperative-sticky`): only the partitions that move are revoked.
    CooperativeSticky,
}

impl AssignmentStrategy {
    /// The protocol name sent in JoinGroup.
    pub fn protocol_name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::RoundRobin => "roundrobin",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// Whether members using it revoke only what moves (the COOPERATIVE rebalance
    /// protocol) rather than everything (EAGER).
    pub fn is_cooperative(self) -> bool {
        self == AssignmentStrategy::CooperativeSticky
    }

    fn parse(name: &str) -> Result<AssignmentStrategy> {
        // Java spells them as class names; accept those too.
        match name.trim().rsplit('.').next().unwrap_or_default() {
            "range" | "RangeAssignor" => Ok(AssignmentStrategy::Range),
            "roundrobin" | "RoundRobinAssignor" => Ok(AssignmentStrategy::RoundRobin),
            "cooperative-sticky" | "CooperativeStickyAssignor" => {
                Ok(AssignmentStrategy::CooperativeSticky)
            }
            other => Err(ClientError::InvalidArgument(format!(
                "partition.assignment.strategy {other:?} is not supported \
                 (range, roundrobin, cooperative-sticky)"
            ))),
        }
    }
}

/// How a subscribed consumer takes part in its group (`group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    /// JoinGroup / SyncGroup / Heartbeat, the leader member assigns (`classic`).
    #[default]
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat: the broker assigns, members reconcile
    /// incrementally (`consumer`).
    Consumer,
}

/// Settings of a [`crate::Consumer`]. Field docs give Kafka's property name and default.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// `group.id`: the consumer group; `None` allows only manual `assign` and no commits.
    pub group_id: Option<String>,
    /// `group.instance.id`: makes this a static member (KIP-345), which keeps its
    /// assignment across restarts within the session timeout and does not leave on close.
    pub group_instance_id: Option<String>,
    /// `auto.offset.reset` (latest).
    pub auto_offset_reset: OffsetReset,
    /// `enable.auto.commit` (true): positions are committed every
    /// `auto_commit_interval` from `poll`, before a rebalance and on close.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (5000).
    pub auto_commit_interval: Duration,
    /// `session.timeout.ms` (45000): how long the coordinator waits for a heartbeat.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (3000).
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms` (300000): longest gap between two `poll` calls before the
    /// member leaves the group so that its partitions move on; also the rebalance timeout.
    pub max_poll_interval: Duration,
    /// `max.poll.records` (500).
    pub max_poll_records: usize,
    /// `isolation.level` (read_uncommitted).
    pub isolation_level: IsolationLevel,
    /// `partition.assignment.strategy` (range, roundrobin), in order of preference.
    pub assignment_strategies: Vec<AssignmentStrategy>,
    /// Long poll and size limits of each fetch (`fetch.max.wait.ms`, `fetch.min.bytes`,
    /// `fetch.max.bytes`, `max.partition.fetch.bytes`).
    pub fetch: FetchOptions,
    /// `group.protocol` (classic).
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor`: the broker-side assignor a `consumer`-protocol member
    /// asks for (`uniform`, `range`); `None` leaves the choice to the broker.
    pub group_remote_assignor: Option<String>,
    /// `client.rack` (none): the member's rack id, sent in ConsumerGroupHeartbeat and in
    /// the classic subscription (v3), for rack-aware assignors.
    pub client_rack: Option<String>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            group_instance_id: None,
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(300),
            max_poll_records: 500,
            isolation_level: IsolationLevel::ReadUncommitted,
            assignment_strategies: vec![AssignmentStrategy::Range, AssignmentStrategy::RoundRobin],
            fetch: FetchOptions::default(),
            group_protocol: GroupProtocol::Classic,
            group_remote_assignor: None,
            client_rack: None,
        }
    }
}

impl ConsumerConfig {
    /// A configuration for `group` with every other setting at Kafka's default.
    pub fn for_group(group: &str) -> ConsumerConfig {
        ConsumerConfig {
            group_id: Some(group.to_owned()),
            ..ConsumerConfig::default()
        }
    }

    /// Sets one setting by its Kafka property name (`group.id`, `auto.offset.reset`, ...).
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let bad = || ClientError::InvalidArgument(format!("{name}={value:?} is not valid"));
        let ms = || -> Result<Duration> {
            value
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad())
        };
        let positive = || -> Result<i32> {
            value
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(bad)
        };
        match name {
            "group.id" => self.group_id = Some(value.to_owned()),
            "group.instance.id" => self.group_instance_id = Some(value.to_owned()),
            "auto.offset.reset" => {
                self.auto_offset_reset = match value {
                    "earliest" => OffsetReset::Earliest,
                    "latest" => OffsetReset::Latest,
                    "none" => OffsetReset::None,
                    _ => return Err(bad()),
                }
            }
            "enable.auto.commit" => self.enable_auto_commit = value.parse().map_err(|_| bad())?,
            "auto.commit.interval.ms" => self.auto_commit_interval = ms()?,
            "session.timeout.ms" => self.session_timeout = ms()?,
            "heartbeat.interval.ms" => self.heartbeat_interval = ms()?,
            "max.poll.interval.ms" => self.max_poll_interval = ms()?,
            "max.poll.records" => {
                self.max_poll_records = value.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?
            }
            "isolation.level" => {
                self.isolation_level = match value {
                    "read_uncommitted" => IsolationLevel::ReadUncommitted,
                    "read_committed" => IsolationLevel::ReadCommitted,
                    _ => return Err(bad()),
                }
            }
            "partition.assignment.strategy" => {
                self.assignment_strategies = value
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(AssignmentStrategy::parse)
                    .collect::<Result<_>>()?;
                if self.assignment_strategies.is_empty() {
                    return Err(bad());
                }
            }
            "group.protocol" => {
                self.group_protocol = match value.trim().to_ascii_lowercase().as_str() {
                    "classic" => GroupProtocol::Classic,
                    "consumer" => GroupProtocol::Consumer,
                    _ => return Err(bad()),
                }
            }
            "group.remote.assignor" => {
                let name = value.trim();
                self.group_remote_assignor = (!name.is_empty()).then(|| name.to_owned());
            }
            "client.rack" => {
                let rack = value.trim();
                self.client_rack = (!rack.is_empty()).then(|| rack.to_owned());
            }
            "fetch.max.wait.ms" => self.fetch.max_wait = ms()?,
            "fetch.min.bytes" => self.fetch.min_bytes = positive()?,
            "fetch.max.bytes" => self.fetch.max_bytes = positive()?,
            "max.partition.fetch.bytes" => self.fetch.partition_max_bytes = positive()?,
            _ => {
                return Err(ClientError::InvalidArgument(format!(
                    "unknown consumer setting {name}"
                )))
            }
        }
        Ok(self)
    }

    /// Whether this member rebalances cooperatively: only when every assignor it offers
    /// is cooperative (Java's rule), since the coordinator may pick any of them.
    pub fn cooperative(&self) -> bool {
        !self.assignment_strategies.is_empty()
            && self
                .assignment_strategies
                .iter()
                .all(|s| s.is_cooperative())
    }

    /// Checks the relations Kafka enforces between the timeouts.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ClientError::InvalidArgument(
                "heartbeat.interval.ms must be lower than session.timeout.ms".into(),
            ));
        }
        if self.max_poll_records == 0 || self.assignment_strategies.is_empty() {
            return Err(ClientError::InvalidArgument(
                "max.poll.records and partition.assignment.strategy must not be empty".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn kafka_property_names_set_the_fields() {
        let mut c = ConsumerConfig::default();
        c.set("group.id", "g")
            .unwrap()
            .set("auto.offset.reset", "earliest")
            .unwrap()
            .set("max.poll.records", "7")
            .unwrap()
            .set("isolation.level", "read_committed")
            .unwrap()
            .set(
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor,range",
            )
            .unwrap()
            .set("session.timeout.ms", "6000")
            .unwrap()
            .set("max.partition.fetch.bytes", "65536")
            .unwrap()
            .set("group.protocol", "consumer")
            .unwrap()
            .set("group.remote.assignor", "uniform")
            .unwrap();
        assert_eq!(c.group_protocol, GroupProtocol::Consumer);
        assert_eq!(c.group_remote_assignor.as_deref(), Some("uniform"));
        assert!(c.set("group.protocol", "eager").is_err());
        assert_eq!(c.group_id.as_deref(), Some("g"));
        assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(c.max_poll_records, 7);
        assert_eq!(c.isolation_level, IsolationLevel::ReadCommitted);
        assert_eq!(
            c.assignment_strategies,
            vec![AssignmentStrategy::RoundRobin, AssignmentStrategy::Range]
        );
        assert_eq!(c.session_timeout, Duration::from_secs(6));
        assert_eq!(c.fetch.partition_max_bytes, 65536);
        assert!(c.set("fetch.max.bytes", "-1").is_err());
        assert!(c.set("max.poll.records", "0").is_err());
        c.set(
            "partition.assignment.strategy",
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        )
        .unwrap();
        assert_eq!(
            c.assignment_strategies,
            vec![AssignmentStrategy::CooperativeSticky]
        );
        assert!(c.cooperative());
        c.set("partition.assignment.strategy", "cooperative-sticky,range")
            .unwrap();
        assert!(
            !c.cooperative(),
            "one eager assignor makes the member eager, as in Java"
        );
        assert!(c.set("partition.assignment.strategy", "sticky").is_err());
        assert!(c.set("no.such.thing", "1").is_err());
        c.set("client.rack", "rack-b").unwrap();
        assert_eq!(c.client_rack.as_deref(), Some("rack-b"));
        c.heartbeat_interval = Duration::from_secs(6);
        assert!(c.validate().is_err());
    }
}
