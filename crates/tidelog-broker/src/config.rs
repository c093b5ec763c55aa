//! Broker settings, under Kafka's own names so an operator's habits carry over.
//!
//! Sources, later ones winning: built-in defaults, the TOML `--config` file (flat dotted
//! keys or nested tables), `TIDELOG_*` environment variables, then `--set name=value`.
//! A name tidelog does not know is a startup error: a typo must not silently fall back
//! to a default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Every broker-level setting tidelog understands, with its default as Kafka writes it.
const KNOWN_SETTINGS: &[(&str, &str)] = &[
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("log.retention.ms", "604800000"),
    ("log.retention.bytes", "-1"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.segment.bytes", "1073741824"),
    ("log.roll.ms", "604800000"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.index.interval.bytes", "4096"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.interval.ms", "9223372036854775807"),
    ("log.flush.scheduler.interval.ms", "1000"),
    ("background.threads", "10"),
    ("log.cleanup.policy", "delete"),
    ("log.cleaner.backoff.ms", "15000"),
    ("log.cleaner.delete.retention.ms", "86400000"),
    ("log.cleaner.min.compaction.lag.ms", "0"),
    ("log.message.timestamp.type", "CreateTime"),
    ("message.max.bytes", "1048588"),
    ("min.insync.replicas", "1"),
    ("unclean.leader.election.enable", "false"),
    ("socket.request.max.bytes", "104857600"),
    ("queued.max.requests", "500"),
    ("max.connections", "10000"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("producer.id.expiration.ms", "86400000"),
    ("transaction.state.log.num.partitions", "50"),
    ("transaction.max.timeout.ms", "900000"),
    ("transactional.id.expiration.ms", "604800000"),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "10000",
    ),
    ("transaction.state.log.replication.factor", "3"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.max.size", "2147483647"),
    ("offsets.retention.minutes", "10080"),
    ("broker.rack", ""),
    ("advertised.host", ""),
    ("offsets.topic.segment.bytes", "104857600"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offset.metadata.max.bytes", "4096"),
    // The cluster: replication, ISR and the controller quorum.
    ("replica.lag.time.max.ms", "30000"),
    ("replica.fetch.max.bytes", "1048576"),
    ("replica.fetch.response.max.bytes", "10485760"),
    ("replica.fetch.wait.max.ms", "500"),
    ("replica.fetch.backoff.ms", "1000"),
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("follower.replication.throttled.rate", "9223372036854775807"),
    ("broker.session.timeout.ms", "9000"),
    ("broker.heartbeat.interval.ms", "2000"),
    ("controlled.shutdown.enable", "true"),
    ("controlled.shutdown.max.wait.ms", "30000"),
    ("auto.leader.rebalance.enable", "true"),
    ("leader.imbalance.check.interval.seconds", "300"),
    ("leader.imbalance.per.broker.percentage", "10"),
    ("controller.quorum.request.timeout.ms", "2000"),
];

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
        let settings = KNOWN_SETTINGS
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
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
        let Some((_, default)) = KNOWN_SETTINGS.iter().find(|(k, _)| *k == name) else {
            return Err(ConfigError::Unknown(name.to_string()));
        };
        let invalid = |reason: &str| ConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        if default.parse::<i64>().is_ok() && value.trim().parse::<i64>().is_err() {
            return Err(invalid("expected an integer"));
        }
        if (*default == "true" || *default == "false") && value.trim().parse::<bool>().is_err() {
            return Err(invalid("expected true or false"));
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

    /// The raw value of a known setting.
    pub fn get(&self, name: &str) -> &str {
        self.settings.get(name).map(String::as_str).unwrap_or("")
    }

    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }

    pub fn get_bool(&self, name: &str) -> bool {
        self.get(name) == "true"
    }

    /// Every setting and its current value (DescribeConfigs on the broker resource).
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.settings.iter().map(|(k, v)| {
            let is_default = KNOWN_SETTINGS.iter().any(|(dk, dv)| dk == k && dv == v);
            (k.as_str(), v.as_str(), is_default)
        })
    }

    pub fn max_request_bytes(&self) -> usize {
        usize::try_from(self.get_i64("socket.request.max.bytes")).unwrap_or(104_857_600)
    }

    /// The host clients are told to connect to.
    pub fn advertised_host(&self) -> String {
        match self.get("advertised.host") {
            "" => self.listen.ip().to_string(),
            host => host.to_string(),
        }
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
        assert_eq!(c.get_i64("num.partitions"), 6);
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
        assert_eq!(c.get_i64("num.partitions"), 3);
        assert_eq!(c.get_i64("log.retention.ms"), 1000);
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
        assert_eq!(c.get_i64("log.segment.bytes"), 1024);
        assert!(c
            .apply_env(vec![("TIDELOG_NOPE".to_string(), "1".to_string())])
            .is_err());
    }
}
