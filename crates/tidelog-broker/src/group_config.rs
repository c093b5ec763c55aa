//! Group configs: Kafka's GROUP config resource (KIP-848; `ConfigResource.Type.GROUP`,
//! 32), the settings one group may override. They are `Config` records of the metadata
//! log (`ConfigResource::Group`), written through the controller by
//! IncrementalAlterConfigs, so every node replays them into its image.
//!
//! The names, types and checks are Kafka 4.2's `GroupConfig`: a value must parse as
//! its type and pass its own rule, and then lie within the broker's bounds for it
//! (`group.consumer.min.session.timeout.ms`...); the whole set is checked merged with
//! the broker's defaults, as Kafka does, so a session timeout must stay above the
//! heartbeat interval whichever level sets either. Kafka's share and streams names are
//! accepted, stored and described so share groups can read them; tidelog's consumer
//! groups read the consumer ones.
//!
//! [`GroupConfigs`] is the one lookup: group id -> effective value, the group's own
//! value where it has one, else the broker's default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::topic_config::ConfigType;
use tidelog_controller::MetadataImage;
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::topic_config::ConfigSource;

pub(crate) const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub(crate) const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
pub(crate) const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
pub(crate) const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
pub(crate) const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub(crate) const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
pub(crate) const SHARE_PARTITION_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
pub(crate) const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
pub(crate) const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
pub(crate) const SHARE_RENEW_ACKNOWLEDGE_ENABLE: &str = "share.renew.acknowledge.enable";
/// KIP-1191: the share group's dead-letter topic (blank: none).
pub(crate) const ERRORS_DEADLETTERQUEUE_TOPIC_NAME: &str = "errors.deadletterqueue.topic.name";
/// KIP-1191: whether the dead-letter record carries the key and value of the record.
pub(crate) const ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE: &str =
    "errors.deadletterqueue.copy.record.enable";
pub(crate) const STREAMS_SESSION_TIMEOUT_MS: &str = "streams.session.timeout.ms";
pub(crate) const STREAMS_HEARTBEAT_INTERVAL_MS: &str = "streams.heartbeat.interval.ms";
pub(crate) const STREAMS_NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
pub(crate) const STREAMS_INITIAL_REBALANCE_DELAY_MS: &str = "streams.initial.rebalance.delay.ms";

/// What a group config's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// A Java INT of at least this.
    IntAtLeast(i64),
    /// One of these words (case-sensitive, as Kafka's `ValidString.in`).
    OneOf(&'static [&'static str]),
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration>` (any case).
    AutoOffsetReset,
    Boolean,
    /// Any text; IncrementalAlterConfigs refuses one starting with `__` (the internal
    /// topics' prefix), after every other check, as Kafka's `GroupConfig.validateValues`.
    DeadLetterTopic,
}

/// A broker setting a group config is bounded by, with Kafka's default for it (read
/// where tidelog has no such setting of its own).
type BrokerBound = Option<(&'static str, &'static str)>;

/// One group config: its name, rule, the broker setting that gives its default (with
/// Kafka's default where tidelog has no such setting), its broker bounds, and doc.
struct Def {
    name: &'static str,
    rule: Rule,
    default_from: Option<&'static str>,
    kafka_default: &'static str,
    min: BrokerBound,
    max: BrokerBound,
    doc: &'static str,
}

const DEFS: &[Def] = &[
    Def {
        name: CONSUMER_SESSION_TIMEOUT_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.consumer.session.timeout.ms"),
        kafka_default: "45000",
        min: Some(("group.consumer.min.session.timeout.ms", "45000")),
        max: Some(("group.consumer.max.session.timeout.ms", "60000")),
        doc: "The timeout to detect client failures when using the consumer group protocol.",
    },
    Def {
        name: CONSUMER_HEARTBEAT_INTERVAL_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.consumer.heartbeat.interval.ms"),
        kafka_default: "5000",
        min: Some(("group.consumer.min.heartbeat.interval.ms", "5000")),
        max: Some(("group.consumer.max.heartbeat.interval.ms", "15000")),
        doc: "The heartbeat interval given to the members of a consumer group.",
    },
    Def {
        name: SHARE_SESSION_TIMEOUT_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.share.session.timeout.ms"),
        kafka_default: "45000",
        min: Some(("group.share.min.session.timeout.ms", "45000")),
        max: Some(("group.share.max.session.timeout.ms", "60000")),
        doc: "The timeout to detect client failures when using the share group protocol.",
    },
    Def {
        name: SHARE_HEARTBEAT_INTERVAL_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.share.heartbeat.interval.ms"),
        kafka_default: "5000",
        min: Some(("group.share.min.heartbeat.interval.ms", "5000")),
        max: Some(("group.share.max.heartbeat.interval.ms", "15000")),
        doc: "The heartbeat interval given to the members of a share group.",
    },
    Def {
        name: SHARE_RECORD_LOCK_DURATION_MS,
        rule: Rule::IntAtLeast(1000),
        default_from: Some("group.share.record.lock.duration.ms"),
        kafka_default: "30000",
        min: Some(("group.share.min.record.lock.duration.ms", "15000")),
        max: Some(("group.share.max.record.lock.duration.ms", "60000")),
        doc: "The record acquisition lock duration in milliseconds for share groups.",
    },
    Def {
        name: SHARE_DELIVERY_COUNT_LIMIT,
        rule: Rule::IntAtLeast(2),
        default_from: Some("group.share.delivery.count.limit"),
        kafka_default: "5",
        min: Some(("group.share.min.delivery.count.limit", "2")),
        max: Some(("group.share.max.delivery.count.limit", "10")),
        doc: "The maximum number of delivery attempts for a record delivered to a share group.",
    },
    Def {
        name: SHARE_PARTITION_MAX_RECORD_LOCKS,
        rule: Rule::IntAtLeast(100),
        default_from: Some("group.share.partition.max.record.locks"),
        kafka_default: "2000",
        min: Some(("group.share.min.partition.max.record.locks", "100")),
        max: Some(("group.share.max.partition.max.record.locks", "10000")),
        doc: "Share-group record lock limit per share-partition.",
    },
    Def {
        name: SHARE_AUTO_OFFSET_RESET,
        rule: Rule::AutoOffsetReset,
        default_from: None,
        kafka_default: "latest",
        min: None,
        max: None,
        doc: "The strategy to initialize the share-partition start offset: earliest, latest or by_duration:<ISO-8601 duration>.",
    },
    Def {
        name: SHARE_ISOLATION_LEVEL,
        rule: Rule::OneOf(&["read_committed", "read_uncommitted"]),
        default_from: None,
        kafka_default: "read_uncommitted",
        min: None,
        max: None,
        doc: "Controls how to read records written transactionally.",
    },
    Def {
        name: SHARE_RENEW_ACKNOWLEDGE_ENABLE,
        rule: Rule::Boolean,
        default_from: None,
        kafka_default: "true",
        min: None,
        max: None,
        doc: "Whether the renew acknowledge type is enabled for the share group.",
    },
    Def {
        name: ERRORS_DEADLETTERQUEUE_TOPIC_NAME,
        rule: Rule::DeadLetterTopic,
        default_from: None,
        kafka_default: "",
        min: None,
        max: None,
        doc: "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic.",
    },
    Def {
        name: ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE,
        rule: Rule::Boolean,
        default_from: None,
        kafka_default: "false",
        min: None,
        max: None,
        doc: "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers.",
    },
    Def {
        name: STREAMS_SESSION_TIMEOUT_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.streams.session.timeout.ms"),
        kafka_default: "45000",
        min: Some(("group.streams.min.session.timeout.ms", "45000")),
        max: Some(("group.streams.max.session.timeout.ms", "60000")),
        doc: "The timeout to detect client failures when using the streams group protocol.",
    },
    Def {
        name: STREAMS_HEARTBEAT_INTERVAL_MS,
        rule: Rule::IntAtLeast(1),
        default_from: Some("group.streams.heartbeat.interval.ms"),
        kafka_default: "5000",
        min: Some(("group.streams.min.heartbeat.interval.ms", "5000")),
        max: Some(("group.streams.max.heartbeat.interval.ms", "15000")),
        doc: "The heartbeat interval given to the members of a streams group.",
    },
    Def {
        name: STREAMS_NUM_STANDBY_REPLICAS,
        rule: Rule::IntAtLeast(0),
        default_from: Some("group.streams.num.standby.replicas"),
        kafka_default: "0",
        min: None,
        max: Some(("group.streams.max.standby.replicas", "2")),
        doc: "The number of standby replicas for each task of a streams group.",
    },
    Def {
        name: STREAMS_INITIAL_REBALANCE_DELAY_MS,
        rule: Rule::IntAtLeast(0),
        default_from: Some("group.streams.initial.rebalance.delay.ms"),
        kafka_default: "3000",
        min: None,
        max: None,
        doc: "The delay before the first rebalance of a new streams group.",
    },
];

/// Kafka's order of the bound checks (`GroupConfig.validateValues`), then the
/// session-above-heartbeat pairs.
const BOUND_ORDER: &[&str] = &[
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_SESSION_TIMEOUT_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
];
const SESSION_ABOVE_HEARTBEAT: &[(&str, &str)] = &[
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS),
];

fn def(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

/// Whether `name` is one of Kafka's group config names.
pub(crate) fn is_group_config(name: &str) -> bool {
    def(name).is_some()
}

/// The type DescribeConfigs reports for group config `name`.
pub(crate) fn config_type(name: &str) -> ConfigType {
    match def(name).map(|d| d.rule) {
        Some(Rule::IntAtLeast(_)) => ConfigType::Int,
        Some(Rule::Boolean) => ConfigType::Boolean,
        _ => ConfigType::String,
    }
}

/// Kafka's documentation of group config `name`.
pub(crate) fn doc(name: &str) -> Option<&'static str> {
    def(name).map(|d| d.doc)
}

/// An ISO-8601 duration as Kafka's `share.auto.offset.reset=by_duration:` takes it
/// (`PnDTnHnMn.nS`, any case, each part optional but one), or `None`.
pub(crate) fn parse_iso_duration(text: &str) -> Option<Duration> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    if days.is_empty() && time.is_none() {
        return None;
    }
    let whole = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let secs = |n: u64, unit: u64| n.checked_mul(unit).map(Duration::from_secs);
    let mut total = Duration::ZERO;
    if !days.is_empty() {
        total = total.checked_add(secs(whole(days.strip_suffix('D')?)?, 86_400)?)?;
    }
    if let Some(t) = time {
        let mut left = t;
        let mut any = false;
        for (unit, seconds) in [('H', 3_600), ('M', 60)] {
            if let Some((n, after)) = left.split_once(unit) {
                total = total.checked_add(secs(whole(n)?, seconds)?)?;
                left = after;
                any = true;
            }
        }
        if let Some(s) = left.strip_suffix('S') {
            let (int, frac) = s.split_once('.').unwrap_or((s, "0"));
            whole(frac)?;
            let nanos: u32 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
            total = total.checked_add(Duration::new(whole(int)?, nanos))?;
            left = "";
            any = true;
        }
        if !any || !left.is_empty() {
            return None;
        }
    }
    Some(total)
}

fn is_iso_duration(text: &str) -> bool {
    parse_iso_duration(text).is_some()
}

/// The value of `name` as its type, or Kafka's `ConfigDef` message.
fn check_rule(d: &Def, value: &str) -> Result<(), String> {
    let invalid = |why: &str| format!("Invalid value {value} for configuration {}: {why}", d.name);
    match d.rule {
        Rule::IntAtLeast(min) => {
            let v: i32 = value
                .trim()
                .parse()
                .map_err(|_| invalid("Not a number of type INT"))?;
            if i64::from(v) < min {
                return Err(invalid(&format!("Value must be at least {min}")));
            }
        }
        Rule::OneOf(words) => {
            if !words.contains(&value.trim()) {
                return Err(invalid(&format!(
                    "String must be one of: {}",
                    words.join(", ")
                )));
            }
        }
        Rule::AutoOffsetReset => {
            let v = value.trim().to_ascii_lowercase();
            let ok = v == "earliest"
                || v == "latest"
                || v.strip_prefix("by_duration:").is_some_and(is_iso_duration);
            if !ok {
                return Err(invalid(
                    "String must be one of: latest, earliest, by_duration:PnDTnHnMn.nS",
                ));
            }
        }
        Rule::Boolean => {
            let v = value.trim().to_ascii_lowercase();
            if v != "true" && v != "false" {
                return Err(invalid("Expected value to be either true or false"));
            }
        }
        // Any text; its one rule is checked last (see `validate`), as Kafka does.
        Rule::DeadLetterTopic => {}
    }
    Ok(())
}

/// A broker bound of a group config: the setting and its value.
type Bound = Option<(&'static str, i64)>;

/// The broker's side of the group configs: each one's default and bounds, read once
/// from the broker's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerGroupDefaults {
    defaults: BTreeMap<&'static str, String>,
    /// name -> its bounds below and above.
    bounds: BTreeMap<&'static str, (Bound, Bound)>,
}

impl BrokerGroupDefaults {
    /// From a source of broker setting values by name (`None`: not a setting here,
    /// so Kafka's default is used).
    pub(crate) fn from_settings(setting: impl Fn(&str) -> Option<String>) -> BrokerGroupDefaults {
        let bound = |b: BrokerBound| {
            b.map(|(name, kafka)| {
                let v = setting(name)
                    .and_then(|v| v.trim().parse().ok())
                    .or_else(|| kafka.parse().ok())
                    .unwrap_or(0);
                (name, v)
            })
        };
        BrokerGroupDefaults {
            defaults: DEFS
                .iter()
                .map(|d| {
                    let value = d
                        .default_from
                        .and_then(&setting)
                        .unwrap_or_else(|| d.kafka_default.to_string());
                    (d.name, value)
                })
                .collect(),
            bounds: DEFS
                .iter()
                .map(|d| (d.name, (bound(d.min), bound(d.max))))
                .collect(),
        }
    }

    pub(crate) fn from_broker(config: &BrokerConfig) -> BrokerGroupDefaults {
        BrokerGroupDefaults::from_settings(|name| config.text(name).map(String::from))
    }

    fn default_of(&self, name: &str) -> &str {
        self.defaults.get(name).map_or("", String::as_str)
    }

    /// Checks the whole set of configs one GROUP resource would have, as Kafka's
    /// `GroupConfig.validate` does (merged with the broker's defaults): names, then
    /// each value's type and rule, then the broker bounds, then session above
    /// heartbeat. The error is Kafka's message (answered INVALID_CONFIG).
    pub(crate) fn validate(&self, props: &BTreeMap<String, String>) -> Result<(), String> {
        if let Some(unknown) = props.keys().find(|n| !is_group_config(n)) {
            return Err(format!("Unknown group config name: {unknown}"));
        }
        let value = |name: &str| -> String {
            props
                .get(name)
                .cloned()
                .unwrap_or_else(|| self.default_of(name).to_string())
        };
        for d in DEFS {
            check_rule(d, &value(d.name))?;
        }
        let int = |name: &str| value(name).trim().parse::<i64>().unwrap_or(0);
        for name in BOUND_ORDER {
            let v = int(name);
            let (min, max) = self.bounds.get(name).copied().unwrap_or((None, None));
            if let Some((bound, min)) = min {
                if v < min {
                    return Err(format!("{name} must be greater than or equal to {bound}"));
                }
            }
            if let Some((bound, max)) = max {
                if v > max {
                    return Err(format!("{name} must be less than or equal to {bound}"));
                }
            }
        }
        for (session, heartbeat) in SESSION_ABOVE_HEARTBEAT {
            if int(session) <= int(heartbeat) {
                return Err(format!("{session} must be greater than {heartbeat}"));
            }
        }
        // KIP-1191: a dead-letter topic is never an internal topic.
        if value(ERRORS_DEADLETTERQUEUE_TOPIC_NAME)
            .trim()
            .starts_with("__")
        {
            return Err(format!(
                "{ERRORS_DEADLETTERQUEUE_TOPIC_NAME}: DLQ topic name must not start with '__'"
            ));
        }
        Ok(())
    }

    /// `name`'s value from a group's stored configs: its own if it still passes its
    /// rule (written under other bounds, it is held to today's, as Kafka's
    /// `GroupConfig.evaluate` caps it), else the broker's default.
    fn resolve(&self, stored: Option<&BTreeMap<String, String>>, name: &str) -> (String, bool) {
        let Some(own) = stored.and_then(|s| s.get(name)) else {
            return (self.default_of(name).to_string(), false);
        };
        let Some(d) = def(name) else {
            return (self.default_of(name).to_string(), false);
        };
        if check_rule(d, own).is_err() {
            tracing::warn!(config = name, value = %own, "ignoring a stored group config");
            return (self.default_of(name).to_string(), false);
        }
        let Rule::IntAtLeast(_) = d.rule else {
            return (own.trim().to_string(), true);
        };
        let mut v: i64 = own.trim().parse().unwrap_or(0);
        let (min, max) = self.bounds.get(name).copied().unwrap_or((None, None));
        if let Some((_, min)) = min {
            v = v.max(min);
        }
        if let Some((_, max)) = max {
            v = v.min(max);
        }
        (v.to_string(), true)
    }
}

/// The lookup the coordinators use: group id -> effective group config, over the
/// metadata images this node replays.
#[derive(Clone)]
pub(crate) struct GroupConfigs {
    defaults: Arc<BrokerGroupDefaults>,
    images: Option<watch::Receiver<Arc<MetadataImage>>>,
}

impl std::fmt::Debug for GroupConfigs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConfigs")
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl GroupConfigs {
    /// The broker's defaults only (no images yet: every group reads the defaults).
    pub(crate) fn new(defaults: BrokerGroupDefaults) -> GroupConfigs {
        GroupConfigs {
            defaults: Arc::new(defaults),
            images: None,
        }
    }

    /// Reads each group's own configs from the images `images` publishes.
    pub(crate) fn with_images(mut self, images: watch::Receiver<Arc<MetadataImage>>) -> Self {
        self.images = Some(images);
        self
    }

    pub(crate) fn defaults(&self) -> &BrokerGroupDefaults {
        &self.defaults
    }

    /// The group's effective value of `name`.
    fn text(&self, group_id: &str, name: &str) -> String {
        match &self.images {
            Some(images) => {
                let image = images.borrow();
                self.defaults.resolve(image.group_configs(group_id), name).0
            }
            None => self.defaults.resolve(None, name).0,
        }
    }

    fn int(&self, group_id: &str, name: &str) -> i64 {
        self.text(group_id, name).trim().parse().unwrap_or(0)
    }

    /// The group's `share.session.timeout.ms`.
    pub(crate) fn share_session_timeout_ms(&self, group_id: &str) -> i64 {
        self.int(group_id, SHARE_SESSION_TIMEOUT_MS)
    }

    /// The group's `share.heartbeat.interval.ms`.
    pub(crate) fn share_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        i32::try_from(self.int(group_id, SHARE_HEARTBEAT_INTERVAL_MS)).unwrap_or(i32::MAX)
    }

    /// The group's `share.record.lock.duration.ms`, `share.delivery.count.limit` and
    /// `share.partition.max.record.locks`.
    pub(crate) fn share_limits(&self, group_id: &str) -> (i64, i64, i64) {
        (
            self.int(group_id, SHARE_RECORD_LOCK_DURATION_MS),
            self.int(group_id, SHARE_DELIVERY_COUNT_LIMIT),
            self.int(group_id, SHARE_PARTITION_MAX_RECORD_LOCKS),
        )
    }

    /// The group's `share.renew.acknowledge.enable` (KIP-1240): whether its members may
    /// RENEW acquisition locks (KIP-1222).
    pub(crate) fn share_renew_acknowledge_enable(&self, group_id: &str) -> bool {
        !self
            .text(group_id, SHARE_RENEW_ACKNOWLEDGE_ENABLE)
            .trim()
            .eq_ignore_ascii_case("false")
    }

    /// The group's `share.auto.offset.reset`, lower case.
    pub(crate) fn share_auto_offset_reset(&self, group_id: &str) -> String {
        self.text(group_id, SHARE_AUTO_OFFSET_RESET)
            .trim()
            .to_ascii_lowercase()
    }

    /// The group's dead-letter topic (KIP-1191 `errors.deadletterqueue.topic.name`,
    /// `None` when blank) and whether its records copy the key and value
    /// (`errors.deadletterqueue.copy.record.enable`).
    pub(crate) fn dead_letter_topic(&self, group_id: &str) -> Option<(String, bool)> {
        let topic = self.text(group_id, ERRORS_DEADLETTERQUEUE_TOPIC_NAME);
        let topic = topic.trim();
        if topic.is_empty() {
            return None;
        }
        let copy = self
            .text(group_id, ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE)
            .trim()
            .eq_ignore_ascii_case("true");
        Some((topic.to_string(), copy))
    }

    /// The group's `consumer.session.timeout.ms`.
    pub(crate) fn consumer_session_timeout_ms(&self, group_id: &str) -> i64 {
        self.int(group_id, CONSUMER_SESSION_TIMEOUT_MS)
    }

    /// The group's `consumer.heartbeat.interval.ms`.
    pub(crate) fn consumer_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        i32::try_from(self.int(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)).unwrap_or(i32::MAX)
    }
}

/// Every group config of `group_id` with its effective value and source, as
/// DescribeConfigs reports a GROUP resource (Kafka's GROUP_CONFIG for the group's own
/// values, DEFAULT_CONFIG for the broker's).
pub(crate) fn describe(
    defaults: &BrokerGroupDefaults,
    image: &MetadataImage,
    group_id: &str,
) -> Vec<(String, String, ConfigSource)> {
    let stored = image.group_configs(group_id);
    DEFS.iter()
        .map(|d| {
            let (value, own) = defaults.resolve(stored, d.name);
            let source = if own {
                ConfigSource::Group
            } else {
                ConfigSource::Default
            };
            (d.name.to_string(), value, source)
        })
        .collect()
}

#[cfg(test)]
#[path = "group_config_tests.rs"]
mod tests;
