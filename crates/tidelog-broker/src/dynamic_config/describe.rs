//! DescribeConfigs of the BROKER resource: every setting's value in force, where it
//! comes from, whether it is dynamic, its Kafka type and its synonyms (every level
//! that sets it or one of its Kafka synonyms, in Kafka's order).

use std::collections::BTreeMap;

use tidelog_controller::topic_config::{self, ConfigType};
use tidelog_controller::MetadataImage;

use super::{class, is_dynamic, resolve, synonyms, Class};
use crate::config::{self, BrokerConfig};
use crate::settings::{self, Kind};
use crate::topic_config::ConfigSource;

/// The Kafka type DescribeConfigs reports for broker setting `name`.
pub(crate) fn config_type(name: &str) -> ConfigType {
    if let Some(def) = topic_config::topic_default_for_broker_key(name).and_then(topic_config::find)
    {
        return def.config_type;
    }
    if config::is_sensitive(name) {
        return ConfigType::Password;
    }
    const LISTS: &[&str] = &[
        "listeners",
        "advertised.listeners",
        "sasl.enabled.mechanisms",
        "ssl.enabled.protocols",
    ];
    let kind = settings::ALL
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, k)| *k);
    match kind {
        Some(Kind::Bool) => ConfigType::Boolean,
        Some(Kind::Int) if name.ends_with(".ms") || name.ends_with(".rate") => ConfigType::Long,
        Some(Kind::Int) => ConfigType::Int,
        _ if LISTS.contains(&name) => ConfigType::List,
        _ if matches!(class(name), Class::Synonym { .. }) => ConfigType::Int,
        _ => ConfigType::String,
    }
}

/// One broker config as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerEntry {
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) source: ConfigSource,
    pub(crate) read_only: bool,
    /// Every level that sets it or a synonym, the winner first (Kafka's order:
    /// level by level, each level's names best first).
    pub(crate) synonyms: Vec<(String, String, ConfigSource)>,
}

/// The synonyms of broker setting `name`: every level that sets it or one of its
/// Kafka synonyms. `per_broker` is false when describing the cluster default, which
/// does not see this broker's own dynamic configs.
pub(crate) fn broker_synonyms(
    static_config: &BrokerConfig,
    image: &MetadataImage,
    name: &str,
    per_broker: bool,
) -> Vec<(String, String, ConfigSource)> {
    let mut names: Vec<&str> = synonyms(name).into_iter().map(|(n, _)| n).collect();
    if names.is_empty() {
        names.push(name);
    }
    let own = image.broker_configs(static_config.node_id);
    let cluster = image.cluster_configs();
    let mut out = Vec::new();
    let mut level = |stored: &BTreeMap<String, String>, source: ConfigSource| {
        for n in &names {
            if let Some(v) = stored.get(*n) {
                out.push((n.to_string(), v.clone(), source));
            }
        }
    };
    if per_broker {
        level(&own, ConfigSource::DynamicBroker);
    }
    level(cluster, ConfigSource::DynamicDefault);
    for n in &names {
        let given = if *n == name {
            static_config
                .given_directly(n)
                .then(|| static_config.text(n).map(str::to_string))
                .flatten()
        } else {
            static_config.given_synonym(n).map(str::to_string)
        };
        if let Some(v) = given {
            out.push((n.to_string(), v, ConfigSource::Broker));
        }
    }
    if let Some((n, default, _)) = settings::ALL.iter().find(|(n, _, _)| *n == name) {
        if !default.is_empty() {
            out.push((n.to_string(), default.to_string(), ConfigSource::Default));
        }
    }
    out
}

/// DescribeConfigs of the BROKER resource `resource_name` on this node: this broker
/// (every setting, with its effective value), or the cluster default (`""`: only the
/// dynamic defaults set). Another broker's id is refused as Kafka refuses it: clients
/// send a broker's describe to that broker.
pub(crate) fn describe_broker(
    static_config: &BrokerConfig,
    image: &MetadataImage,
    resource_name: &str,
) -> Result<Vec<BrokerEntry>, String> {
    let node_id = static_config.node_id;
    if resource_name.is_empty() {
        return Ok(image
            .cluster_configs()
            .iter()
            .map(|(name, value)| {
                let synonyms = broker_synonyms(static_config, image, name, false);
                BrokerEntry {
                    name: name.clone(),
                    value: value.clone(),
                    source: ConfigSource::DynamicDefault,
                    read_only: !is_dynamic(name),
                    synonyms,
                }
            })
            .collect());
    }
    if resource_name.trim().parse::<i32>().ok() != Some(node_id) {
        return Err(format!(
            "Unexpected broker id, expected {node_id} or empty string, but received {resource_name}"
        ));
    }
    let effective = resolve(static_config, image);
    let mut out: Vec<BrokerEntry> = effective
        .all()
        .map(|(name, value)| {
            let synonyms = broker_synonyms(static_config, image, name, true);
            let source = synonyms
                .first()
                .map_or(ConfigSource::Default, |(_, _, s)| *s);
            let mut value = value.to_string();
            if name == settings::ADVERTISED_LISTENERS.name && value.is_empty() {
                value = registered_listeners(image, node_id);
            }
            BrokerEntry {
                name: name.to_string(),
                value,
                source,
                read_only: !is_dynamic(name),
                synonyms,
            }
        })
        .collect();
    // Dynamic names that are not tidelog settings (Kafka's no-effect ones, synonyms,
    // custom names): each level that sets them.
    let own = image.broker_configs(node_id);
    let mut extra: BTreeMap<&str, Vec<(String, String, ConfigSource)>> = BTreeMap::new();
    for (stored, source) in [
        (&own, ConfigSource::DynamicBroker),
        (image.cluster_configs(), ConfigSource::DynamicDefault),
    ] {
        for (name, value) in stored {
            if effective.text(name).is_none() {
                extra
                    .entry(name.as_str())
                    .or_default()
                    .push((name.clone(), value.clone(), source));
            }
        }
    }
    // Kafka's other names of a setting given in the configuration file
    // (`log.retention.hours=1`) are settings of their own in Kafka's describe too.
    for (name, _) in effective.all() {
        for (synonym, _) in super::synonyms(name).into_iter().skip(1) {
            if let Some(value) = static_config.given_synonym(synonym) {
                extra.entry(synonym).or_default().push((
                    synonym.to_string(),
                    value.to_string(),
                    ConfigSource::Broker,
                ));
            }
        }
    }
    for (name, synonyms) in extra {
        let (_, value, source) = synonyms[0].clone();
        out.push(BrokerEntry {
            name: name.to_string(),
            value,
            source,
            read_only: false,
            synonyms,
        });
    }
    Ok(out)
}

/// This broker's registered listeners as `advertised.listeners` writes them.
fn registered_listeners(image: &MetadataImage, node_id: i32) -> String {
    image.broker(node_id).map_or_else(String::new, |b| {
        b.listeners
            .iter()
            .map(|e| format!("{}://{}:{}", e.name, e.host, e.port))
            .collect::<Vec<_>>()
            .join(",")
    })
}
