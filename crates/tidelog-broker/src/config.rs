//! Broker settings, under Kafka's own names so an operator's habits carry over.
//!
//! Sources, later ones winning: built-in defaults, the TOML `--config` file (flat dotted
//! keys or nested tables), `TIDELOG_*` environment variables, then `--set name=value`.
//! A name tidelog does not know is a startup error: a typo must not silently fall back
//! to a default. The settings themselves, with their types, are listed once in
//! `crate::settings`; code reads them only through its typed constants.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::settings::{self, Kind, Setting, Value};

/// Environment variables that configure the process itself rather than a Kafka setting.
const RESERVED_ENV: &[&str] = &[
    "TIDELOG_NODE_ID",
    "TIDELOG_LISTEN",
    "TIDELOG_ADMIN_LISTEN",
    "TIDELOG_DATA_DIR",
    "TIDELOG_CONFIG",
    "TIDELOG_LOG",
    "TIDELOG_BIN",
    // The cluster flags of `tidelog serve`, and the CLI's `--bootstrap`.
    "TIDELOG_CONTROLLER_LISTEN",
    "TIDELOG_QUORUM",
    "TIDELOG_ROLES",
    "TIDELOG_BOOTSTRAP",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown setting `{0}` (settings use Kafka's names, e.g. log.retention.ms)")]
    Unknown(String),
    #[error("setting `{name}`: `{value}` is not valid: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
    #[error("cannot read config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("`--set {0}` must have the form name=value")]
    BadAssignment(String),
}

/// The resolved settings of one node.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub data_dir: PathBuf,
    settings: BTreeMap<String, String>,
}

impl BrokerConfig {
    pub fn new(
        node_id: i32,
        listen: SocketAddr,
        admin_listen: SocketAddr,
        data_dir: PathBuf,
    ) -> Self {
        let settings = settings::ALL
            .iter()
            .map(|(k, v, _)| ((*k).to_string(), (*v).to_string()))
            .collect();
        BrokerConfig {
            node_id,
            listen,
            admin_listen,
            data_dir,
            settings,
        }
    }

    /// Sets one Kafka-named setting, validating the name and (for numeric and boolean
    /// settings) the value.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let Some((_, _, kind)) = settings::ALL.iter().find(|(k, _, _)| *k == name) else {
            return Err(ConfigError::Unknown(name.to_string()));
        };
        let invalid = |reason: &str| ConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        match kind {
            Kind::Int if i64::parse(value).is_none() => return Err(invalid("expected an integer")),
            Kind::Bool if bool::parse(value).is_none() => {
                return Err(invalid("expected true or false"))
            }
            _ => {}
        }
        self.settings
            .insert(name.to_string(), value.trim().to_string());
        Ok(())
    }

    /// Applies `name=value`.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError::BadAssignment(assignment.to_string()))?;
        self.set(name.trim(), value)
    }

    /// Applies every setting of a TOML file; nested tables are flattened with dots.
    pub fn apply_toml(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| file_error(e.to_string()))?;
        let mut flat = Vec::new();
        flatten_toml("", &toml::Value::Table(table), &mut flat);
        for (name, value) in flat {
            self.set(&name, &value)?;
        }
        Ok(())
    }

    /// Applies `TIDELOG_LOG_RETENTION_MS=...` style variables (underscores become dots).
    pub fn apply_env<I: IntoIterator<Item = (String, String)>>(
        &mut self,
        vars: I,
    ) -> Result<(), ConfigError> {
        for (key, value) in vars {
            let Some(rest) = key.strip_prefix("TIDELOG_") else {
                continue;
            };
            if RESERVED_ENV.contains(&key.as_str()) {
                continue;
            }
            let name = rest.to_ascii_lowercase().replace('_', ".");
            self.set(&name, &value)?;
        }
        Ok(())
    }

    /// The value of `setting` (validated as its type when it was set; its default if
    /// it somehow is not).
    pub fn get<T: Value + Default>(&self, setting: Setting<T>) -> T {
        self.settings
            .get(setting.name)
            .and_then(|v| T::parse(v))
            .or_else(|| setting.default_value())
            .unwrap_or_default()
    }

    /// A milliseconds setting as a duration (negative reads as zero).
    pub fn duration(&self, setting: Setting<i64>) -> Duration {
        Setting::as_duration(self.get(setting))
    }

    /// An integer setting for a count or size: clamped into `T`'s range.
    pub fn count<T: TryFrom<i64> + Bounded>(&self, setting: Setting<i64>) -> T {
        let v = self.get(setting);
        T::try_from(v).unwrap_or(if v < 0 { T::MIN } else { T::MAX })
    }

    /// Every setting and its current value (DescribeConfigs on the broker resource).
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.settings.iter().map(|(k, v)| {
            let is_default = settings::ALL.iter().any(|(dk, dv, _)| dk == k && dv == v);
            (k.as_str(), v.as_str(), is_default)
        })
    }

    pub fn max_request_bytes(&self) -> usize {
        self.count(settings::SOCKET_REQUEST_MAX_BYTES)
    }

    /// The host clients are told to connect to.
    pub fn advertised_host(&self) -> String {
        match self.get(settings::ADVERTISED_HOST).as_str() {
            "" => self.listen.ip().to_string(),
            host => host.to_string(),
        }
    }
}

/// Integer types a count setting is read into.
pub trait Bounded: Sized {
    const MIN: Self;
    const MAX: Self;
}

macro_rules! bounded {
    ($($t:ty),*) => { $(impl Bounded for $t { const MIN: $t = <$t>::MIN; const MAX: $t = <$t>::MAX; })* };
}

bounded!(i16, i32, i64, u32, u64, usize);

#[cfg(test)]
impl BrokerConfig {
    /// A test's view of a setting by name (what DescribeConfigs shows).
    fn raw(&self, name: &str) -> &str {
        self.settings.get(name).map(String::as_str).unwrap_or("")
    }
}

fn flatten_toml(prefix: &str, value: &toml::Value, out: &mut Vec<(String, String)>) {
    match value {
        toml::Value::Table(table) => {
            for (k, v) in table {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_toml(&name, v, out);
            }
        }
        toml::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BrokerConfig {
        let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
        BrokerConfig::new(1, addr, addr, PathBuf::from("/tmp/x"))
    }

    #[test]
    fn unknown_names_are_refused() {
        let mut c = config();
        assert!(matches!(
            c.set("log.retention.mss", "1"),
            Err(ConfigError::Unknown(_))
        ));
        assert!(matches!(
            c.set("num.partitions", "x"),
            Err(ConfigError::Invalid { .. })
        ));
        c.set_assignment("num.partitions=6").unwrap();
        assert_eq!(c.get(settings::NUM_PARTITIONS), 6);
        assert_eq!(c.raw("num.partitions"), "6");
    }

    #[test]
    fn toml_nested_and_flat_keys_both_work() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "\"num.partitions\" = 3\n[log.retention]\nms = 1000\n",
        )
        .unwrap();
        let mut c = config();
        c.apply_toml(&path).unwrap();
        assert_eq!(c.get(settings::NUM_PARTITIONS), 3);
        assert_eq!(c.get(settings::LOG_RETENTION_MS), 1000);
        std::fs::write(&path, "bogus = 1\n").unwrap();
        assert!(c.apply_toml(&path).is_err());
    }

    #[test]
    fn environment_overrides_use_dots() {
        let mut c = config();
        c.apply_env(vec![
            ("TIDELOG_LOG_SEGMENT_BYTES".to_string(), "1024".to_string()),
            ("TIDELOG_DATA_DIR".to_string(), "/x".to_string()),
            (
                "TIDELOG_BOOTSTRAP".to_string(),
                "127.0.0.1:9092".to_string(),
            ),
            ("TIDELOG_QUORUM".to_string(), "1@127.0.0.1:9093".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ])
        .unwrap();
        assert_eq!(c.get(settings::LOG_SEGMENT_BYTES), 1024);
        assert!(c
            .apply_env(vec![("TIDELOG_NOPE".to_string(), "1".to_string())])
            .is_err());
    }
}
