//! Dynamic broker configs (Kafka's KIP-226): settings changed at run time through
//! IncrementalAlterConfigs / AlterConfigs on the BROKER resource, for one broker
//! (`"<id>"`) or as the cluster-wide default (`""`). They are `Config` records of the
//! metadata log, so every node replays them into its image, and snapshots keep them.
//!
//! [`resolve`] is the one place an effective value is decided, with Kafka's
//! precedence: this broker's dynamic config, then the cluster default, then the static
//! configuration (file, environment, `--set`), then the built-in default. Within one
//! level a setting's own name beats its synonyms (`log.retention.ms` over
//! `log.retention.minutes` over `log.retention.hours`); a higher level beats a lower
//! one whatever names either used, as Kafka's `DynamicBrokerConfig.overrideProps`
//! drops the lower level's synonyms.

use std::collections::BTreeMap;

use tidelog_controller::topic_config::{self, ConfigType};
use tidelog_controller::MetadataImage;

use crate::config::{self, BrokerConfig, DynamicLevel};
use crate::kafka_names::{self, Treatment};
use crate::settings::{self, Kind, Value};

/// tidelog settings Kafka marks dynamic that are not topic-config defaults, and that
/// tidelog re-reads while running (the topic defaults all are).
const APPLIED: &[&str] = &[
    settings::LOG_CLEANER_BACKOFF_MS.name,
    settings::MAX_CONNECTIONS.name,
    settings::FOLLOWER_REPLICATION_THROTTLED_RATE.name,
    settings::PRODUCER_ID_EXPIRATION_MS.name,
    // KIP-1191's cluster configs: read from the effective settings at each
    // dead-letter write.
    settings::ERRORS_DEADLETTERQUEUE_AUTO_CREATE_TOPICS_ENABLE.name,
    settings::ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX.name,
];

/// Kafka's dynamic settings that tidelog accepts with no effect, as it does them at
/// start-up: stored and described, so Kafka's tooling that sets them keeps working.
const NO_EFFECT: &[&str] = &[
    "leader.replication.throttled.rate",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    "max.connection.creation.rate",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// Kafka's dynamic settings that tidelog reads only at start-up (its listeners, TLS
/// material and SASL mechanisms are bound once; the flusher's thread count is fixed).
const NOT_LIVE: &[&str] = &[
    settings::BACKGROUND_THREADS.name,
    settings::LISTENERS.name,
    settings::ADVERTISED_LISTENERS.name,
    settings::LISTENER_SECURITY_PROTOCOL_MAP.name,
    settings::SASL_ENABLED_MECHANISMS.name,
];

/// Kafka's TLS settings that are dynamic only per listener
/// (`listener.name.<name>.ssl.*`): without the prefix Kafka refuses them by name.
const SECURITY_PER_LISTENER: &[&str] = &[
    settings::SSL_KEYSTORE_TYPE.name,
    settings::SSL_KEYSTORE_LOCATION.name,
    settings::SSL_KEYSTORE_PASSWORD.name,
    settings::SSL_KEY_PASSWORD.name,
    settings::SSL_KEYSTORE_KEY.name,
    settings::SSL_KEYSTORE_CERTIFICATE_CHAIN.name,
    settings::SSL_TRUSTSTORE_TYPE.name,
    settings::SSL_TRUSTSTORE_LOCATION.name,
    settings::SSL_TRUSTSTORE_CERTIFICATES.name,
    "ssl.truststore.password",
];

/// What a dynamic change of one name can do here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A tidelog setting applied without restart.
    Applied,
    /// Kafka's other unit of an applied setting (`log.retention.hours`).
    Synonym { of: &'static str, unit_ms: i64 },
    /// Kafka's dynamic setting with no effect here (stored and described).
    NoEffect,
    /// Kafka's dynamic setting that tidelog reads only at start-up.
    NotLive,
    /// Kafka's TLS setting that is dynamic only with a listener prefix.
    SecurityPerListener,
    /// Static in Kafka (`Cannot update these configs dynamically`).
    Static,
    /// Not a Kafka broker setting: Kafka stores such names (custom configs), and so
    /// does tidelog; nothing reads them.
    Unknown,
}

pub(crate) fn class(name: &str) -> Class {
    if config::listener_override(name).is_some() {
        return Class::NotLive;
    }
    if SECURITY_PER_LISTENER.contains(&name) {
        return Class::SecurityPerListener;
    }
    if NOT_LIVE.contains(&name) {
        return Class::NotLive;
    }
    if settings::ALL.iter().any(|(n, _, _)| *n == name) {
        let applied =
            APPLIED.contains(&name) || topic_config::topic_default_for_broker_key(name).is_some();
        return if applied {
            Class::Applied
        } else {
            Class::Static
        };
    }
    if NO_EFFECT.contains(&name) {
        return Class::NoEffect;
    }
    match kafka_names::treatment(name) {
        Some(Treatment::Synonym { of, unit_ms, .. }) if class(of) == Class::Applied => {
            Class::Synonym { of, unit_ms }
        }
        Some(_) => Class::Static,
        None => Class::Unknown,
    }
}

/// Whether `name` can be changed by a dynamic config here (DescribeConfigs answers
/// the others `read_only`).
pub(crate) fn is_dynamic(name: &str) -> bool {
    matches!(
        class(name),
        Class::Applied | Class::Synonym { .. } | Class::NoEffect | Class::Unknown
    )
}

/// How docs/configuration.md describes `name`'s update mode.
#[cfg(test)]
pub(crate) fn doc_mode(name: &str) -> &'static str {
    match class(name) {
        Class::Applied | Class::Synonym { .. } => "yes: applied without restart",
        Class::NoEffect => "yes (stored; no effect here)",
        Class::NotLive | Class::SecurityPerListener => {
            "no: dynamic in Kafka, read only at start-up here"
        }
        Class::Static | Class::Unknown => "",
    }
}

/// `name` and its Kafka synonyms, the winning one first (`log.retention.ms`,
/// `log.retention.minutes`, `log.retention.hours`), each with its unit in ms (1 for
/// the setting itself).
pub(crate) fn synonyms(name: &str) -> Vec<(&'static str, i64)> {
    let Some((own, _, _)) = settings::ALL.iter().find(|(n, _, _)| *n == name) else {
        return Vec::new();
    };
    let mut others: Vec<(&'static str, i64, u8)> = kafka_names::KAFKA_BROKER_NAMES
        .iter()
        .filter_map(|(n, t)| match t {
            Treatment::Synonym { of, unit_ms, rank } if *of == name => Some((*n, *unit_ms, *rank)),
            _ => None,
        })
        .collect();
    others.sort_by_key(|(_, _, rank)| *rank);
    std::iter::once((*own, 1))
        .chain(others.into_iter().map(|(n, u, _)| (n, u)))
        .collect()
}

/// The effective view of this node's settings: `static_config` under the dynamic
/// configs of `image` (this broker's, then the cluster default's). A stored value
/// that no longer validates (written by another version) is skipped with a warning:
/// replay never fails.
pub(crate) fn resolve(static_config: &BrokerConfig, image: &MetadataImage) -> BrokerConfig {
    let own = image.broker_configs(static_config.node_id);
    resolve_with(static_config, image.cluster_configs(), &own)
}

fn resolve_with(
    static_config: &BrokerConfig,
    cluster: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> BrokerConfig {
    let mut out = static_config.clone();
    if cluster.is_empty() && own.is_empty() {
        return out;
    }
    for (name, _, _) in settings::ALL {
        if class(name) != Class::Applied {
            continue;
        }
        let levels = [
            (DynamicLevel::Broker, own),
            (DynamicLevel::ClusterDefault, cluster),
        ];
        for (level, stored) in levels {
            let Some(value) = level_value(name, stored) else {
                continue;
            };
            match check_value(name, &value) {
                Ok(()) => {
                    out.overlay(name, &value, level);
                    break;
                }
                Err(why) => {
                    tracing::warn!(setting = name, %value, %why, "ignoring a stored dynamic config")
                }
            }
        }
    }
    out
}

/// The value one level gives `name`, through its own name or the best synonym, in
/// `name`'s unit.
fn level_value(name: &str, stored: &BTreeMap<String, String>) -> Option<String> {
    synonyms(name).into_iter().find_map(|(n, unit_ms)| {
        let raw = stored.get(n)?;
        if unit_ms == 1 {
            return Some(raw.trim().to_string());
        }
        let units: i64 = raw.trim().parse().ok()?;
        Some(config::synonym_ms(units, unit_ms).to_string())
    })
}

/// Why `value` is not acceptable for the dynamic setting `name`, in Kafka's words.
fn check_value(name: &str, value: &str) -> Result<(), String> {
    let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
    match class(name) {
        Class::Applied => {
            let kind = settings::ALL
                .iter()
                .find(|(n, _, _)| *n == name)
                .map_or(Kind::Text, |(_, _, k)| *k);
            match kind {
                Kind::Int if i64::parse(value).is_none() => {
                    return Err(invalid("Not a number of type LONG"))
                }
                Kind::Bool if bool::parse(value).is_none() => {
                    return Err(invalid("Expected value to be either true or false"))
                }
                _ => {}
            }
            crate::setting_rules::check(name, value).map_err(|why| invalid(&why))
        }
        Class::Synonym { .. } => value
            .trim()
            .parse::<i64>()
            .map(|_| ())
            .map_err(|_| invalid("Not a number of type INT")),
        _ => Ok(()),
    }
}

/// Kafka's `Set(a, b)` rendering of a set of names in its error messages.
fn names_set(names: &[&str]) -> String {
    format!("Set({})", names.join(", "))
}

/// Checks the whole set of dynamic configs one BROKER resource would have, in
/// Kafka's order (`DynamicBrokerConfig.validateConfigs`): static settings, TLS
/// settings without a listener prefix, then the values. The error is Kafka's message;
/// Kafka answers all of these INVALID_REQUEST (KAFKA-13609).
pub(crate) fn validate(props: &BTreeMap<String, String>) -> Result<(), String> {
    let named = |wanted: &dyn Fn(Class) -> bool| -> Vec<&str> {
        props
            .keys()
            .map(String::as_str)
            .filter(|n| wanted(class(n)))
            .collect()
    };
    let fixed = named(&|c| c == Class::Static);
    if !fixed.is_empty() {
        return Err(format!(
            "Cannot update these configs dynamically: {}",
            names_set(&fixed)
        ));
    }
    let unprefixed = named(&|c| c == Class::SecurityPerListener);
    if !unprefixed.is_empty() {
        return Err(format!(
            "These security configs can be dynamically updated only per-listener using the listener prefix: {}",
            names_set(&unprefixed)
        ));
    }
    let not_live = named(&|c| c == Class::NotLive);
    if !not_live.is_empty() {
        return Err(format!(
            "tidelog applies these configs only at start-up (set them in the config file and restart): {}",
            names_set(&not_live)
        ));
    }
    for (name, value) in props {
        check_value(name, value)?;
    }
    Ok(())
}

/// Whether `name` holds a comma-separated list (APPEND and SUBTRACT apply to lists
/// only).
pub(crate) fn is_list(name: &str) -> bool {
    config_type(name) == ConfigType::List
}

/// Checks that a per-broker resource names this node, as Kafka's
/// `ConfigAdminManager` does before anything else.
pub(crate) fn check_resource_name(resource_name: &str, node_id: i32) -> Result<(), String> {
    if resource_name.is_empty() {
        return Ok(());
    }
    let id: i32 = resource_name
        .parse()
        .map_err(|_| format!("Node id must be an integer, but it is: {resource_name}"))?;
    if id != node_id {
        return Err(format!(
            "Unexpected broker id, expected {node_id}, but received {resource_name}"
        ));
    }
    Ok(())
}

mod describe;
pub(crate) use describe::{broker_synonyms, config_type, describe_broker, BrokerEntry};

#[cfg(test)]
#[path = "dynamic_config_tests.rs"]
mod tests;
