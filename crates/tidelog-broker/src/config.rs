//! Broker settings, under Kafka's own names so an operator's habits carry over.
//!
//! Sources, later ones winning: built-in defaults, the `--config` file (a Java
//! `.properties` file such as Kafka's `server.properties`, or TOML with flat dotted keys
//! or nested tables when its name ends in `.toml`), `TIDELOG_*` environment variables,
//! then `--set name=value`. Kafka's broker names that are not tidelog settings are
//! handled as `crate::kafka_names` says (read by `tidelog serve`, converted, accepted
//! with a warning, or refused); any other name is a startup error: a typo must not
//! silently fall back to a default. Values are checked by `crate::setting_rules`. The settings themselves, with their types, are listed once in
//! `crate::settings`; code reads them only through its typed constants.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::kafka_names::{self, Treatment};
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
    "TIDELOG_API_TIMEOUT_MS",
];

/// Where a setting's value came from; every error about a value names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The file given by `--config`.
    File(String),
    /// An environment variable `TIDELOG_<NAME>`.
    Env(String),
    /// `--set name=value`.
    Set,
    /// Set by the program (a test, an embedding application).
    Program,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(path) => write!(f, "in config file {path}"),
            Origin::Env(var) => write!(f, "from environment variable {var}"),
            Origin::Set => f.write_str("from --set"),
            Origin::Program => f.write_str("set by the program"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "unknown setting `{name}` {origin} (settings use Kafka's names, e.g. log.retention.ms)"
    )]
    Unknown { name: String, origin: Origin },
    #[error("setting `{name}` {origin}: `{value}` is not valid: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
        origin: Origin,
    },
    #[error("setting `{name}` {origin}: `{value}` cannot be honoured: {why}")]
    Refused {
        name: String,
        value: String,
        why: &'static str,
        origin: Origin,
    },
    #[error("`{first}` ({first_value}) must not exceed `{second}` ({second_value})")]
    Inconsistent {
        first: &'static str,
        first_value: i64,
        second: &'static str,
        second_value: i64,
    },
    #[error("cannot read config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("`--set {0}` must have the form name=value")]
    BadAssignment(String),
    #[error("the Kafka listener on {0} listens on every interface, and clients cannot connect to that address: set advertised.listeners to the address they should use (e.g. --set advertised.listeners=PLAINTEXT://broker1.example.com:9092)")]
    Unadvertised(String),
}

/// The resolved settings of one node.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// The node's first log directory: the metadata log, the quorum's state and
    /// `meta.properties` live here (Kafka's `metadata.log.dir` default), besides
    /// partitions.
    pub data_dir: PathBuf,
    /// Further log directories (`log.dirs` with several entries, JBOD): partitions
    /// only, each new one placed in the directory holding the fewest.
    pub extra_log_dirs: Vec<PathBuf>,
    settings: BTreeMap<String, String>,
    /// Where each setting that is not its default came from.
    origins: BTreeMap<String, Origin>,
    /// For a setting given through a Kafka synonym, the synonym's rank (the setting
    /// itself is rank 0): a lower rank is never overwritten by a higher one.
    ranks: BTreeMap<String, u8>,
    /// Kafka names read by `tidelog serve` itself (`node.id`, `log.dirs`, ...).
    process: BTreeMap<String, (String, Origin)>,
    /// Kafka names accepted without effect, each with why (one warning each at start).
    ignored: BTreeMap<String, (Origin, &'static str)>,
    /// Kafka synonyms given at start-up (`log.retention.hours`), as given: the
    /// STATIC_BROKER_CONFIG synonyms DescribeConfigs lists.
    given_synonyms: BTreeMap<String, String>,
    /// The settings a dynamic config overrides in this view (see
    /// `crate::dynamic_config::resolve`), with the level that set them.
    dynamic: BTreeMap<String, DynamicLevel>,
}

/// Which dynamic config (KIP-226) set a value: the broker's own or the cluster default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicLevel {
    Broker,
    ClusterDefault,
}

/// A Kafka setting accepted with no effect here: the start-up warning it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredSetting {
    pub name: String,
    pub origin: Origin,
    pub why: &'static str,
}

impl BrokerConfig {
    /// Every directory partitions may live in, the data directory first.
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.data_dir.clone())
            .chain(self.extra_log_dirs.iter().cloned())
            .collect()
    }

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
            extra_log_dirs: Vec::new(),
            settings,
            origins: BTreeMap::new(),
            ranks: BTreeMap::new(),
            process: BTreeMap::new(),
            ignored: BTreeMap::new(),
            given_synonyms: BTreeMap::new(),
            dynamic: BTreeMap::new(),
        }
    }

    /// Sets one Kafka-named setting, validating the name and (for numeric and boolean
    /// settings) the value.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        self.set_from(name, value, Origin::Program)
    }

    /// Like [`BrokerConfig::set`]; an error names `origin`.
    pub fn set_from(&mut self, name: &str, value: &str, origin: Origin) -> Result<(), ConfigError> {
        if listener_override(name).is_some() {
            // Per-listener TLS and SASL settings are text, checked when the listener
            // starts.
            self.settings
                .insert(name.to_string(), value.trim().to_string());
            self.origins.insert(name.to_string(), origin);
            return Ok(());
        }
        let Some((_, _, kind)) = settings::ALL.iter().find(|(k, _, _)| *k == name) else {
            return match kafka_names::treatment(name) {
                Some(treatment) => self.set_kafka_name(name, value, origin, treatment),
                None => Err(ConfigError::Unknown {
                    name: name.to_string(),
                    origin,
                }),
            };
        };
        self.set_ranked(name, value, origin, *kind, 0)
    }

    /// Sets tidelog setting `name` unless a synonym of lower rank already did.
    fn set_ranked(
        &mut self,
        name: &str,
        value: &str,
        origin: Origin,
        kind: Kind,
        rank: u8,
    ) -> Result<(), ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            origin: origin.clone(),
        };
        match kind {
            Kind::Int if i64::parse(value).is_none() => return Err(invalid("expected an integer")),
            Kind::Bool if bool::parse(value).is_none() => {
                return Err(invalid("expected true or false"))
            }
            _ => {}
        }
        crate::setting_rules::check(name, value).map_err(|reason| invalid(&reason))?;
        if self.ranks.get(name).is_some_and(|set| *set < rank) {
            return Ok(());
        }
        self.ranks.insert(name.to_string(), rank);
        self.settings
            .insert(name.to_string(), value.trim().to_string());
        self.origins.insert(name.to_string(), origin);
        Ok(())
    }

    /// A Kafka broker name that is not a tidelog setting, handled as `treatment` says.
    fn set_kafka_name(
        &mut self,
        name: &str,
        value: &str,
        origin: Origin,
        treatment: Treatment,
    ) -> Result<(), ConfigError> {
        match treatment {
            Treatment::Process => {
                self.process
                    .insert(name.to_string(), (value.trim().to_string(), origin));
            }
            Treatment::Synonym { of, unit_ms, rank } => {
                let units: i64 = value.trim().parse().map_err(|_| ConfigError::Invalid {
                    name: name.to_string(),
                    value: value.to_string(),
                    reason: "expected an integer".into(),
                    origin: origin.clone(),
                })?;
                let ms = synonym_ms(units, unit_ms);
                self.set_ranked(of, &ms.to_string(), origin, Kind::Int, rank)?;
                self.given_synonyms
                    .insert(name.to_string(), value.trim().to_string());
            }
            Treatment::Ignored(why) => {
                self.ignored.insert(name.to_string(), (origin, why));
            }
            Treatment::Refused { off, why } => {
                let trimmed = value.trim();
                if !off.iter().any(|v| v.eq_ignore_ascii_case(trimmed)) {
                    return Err(ConfigError::Refused {
                        name: name.to_string(),
                        value: value.to_string(),
                        why,
                        origin,
                    });
                }
            }
        }
        Ok(())
    }

    /// The value of a Kafka name `tidelog serve` reads itself (`node.id`, `log.dirs`,
    /// `process.roles`, `controller.quorum.voters`, ...), and where it came from.
    pub fn process_setting(&self, name: &str) -> Option<(&str, &Origin)> {
        self.process.get(name).map(|(v, o)| (v.as_str(), o))
    }

    /// The Kafka settings given that have no effect here, sorted by name.
    pub fn ignored_settings(&self) -> Vec<IgnoredSetting> {
        self.ignored
            .iter()
            .map(|(name, (origin, why))| IgnoredSetting {
                name: name.clone(),
                origin: origin.clone(),
                why,
            })
            .collect()
    }

    /// Checks the settings that must agree with each other (Kafka refuses to start
    /// with, e.g., group.min.session.timeout.ms above group.max.session.timeout.ms).
    pub fn check_consistency(&self) -> Result<(), ConfigError> {
        for (first, second) in crate::setting_rules::ORDERED {
            let (a, b) = (self.get(*first), self.get(*second));
            if a > b {
                return Err(ConfigError::Inconsistent {
                    first: first.name,
                    first_value: a,
                    second: second.name,
                    second_value: b,
                });
            }
        }
        Ok(())
    }

    /// Where `name`'s value came from, as DescribeConfigs reports it.
    pub(crate) fn source(&self, name: &str) -> crate::topic_config::ConfigSource {
        use crate::topic_config::ConfigSource;
        match self.dynamic.get(name) {
            Some(DynamicLevel::Broker) => ConfigSource::DynamicBroker,
            Some(DynamicLevel::ClusterDefault) => ConfigSource::DynamicDefault,
            None if self.origins.contains_key(name) => ConfigSource::Broker,
            None => ConfigSource::Default,
        }
    }

    /// Whether `name` was given at start-up by its own name (not only through a
    /// synonym such as `log.retention.hours`).
    pub(crate) fn given_directly(&self, name: &str) -> bool {
        self.origins.contains_key(name) && self.ranks.get(name).is_none_or(|r| *r == 0)
    }

    /// The Kafka synonym `name` as given at start-up, if it was.
    pub(crate) fn given_synonym(&self, name: &str) -> Option<&str> {
        self.given_synonyms.get(name).map(String::as_str)
    }

    /// This view with `name` set to `value` by a dynamic config of `level` (the value
    /// was validated when it was stored; see `crate::dynamic_config`).
    pub(crate) fn overlay(&mut self, name: &str, value: &str, level: DynamicLevel) {
        self.settings
            .insert(name.to_string(), value.trim().to_string());
        self.dynamic.insert(name.to_string(), level);
    }

    /// Where `name`'s value came from.
    pub fn origin(&self, name: &str) -> Origin {
        self.origins.get(name).cloned().unwrap_or(Origin::Program)
    }

    /// Applies `name=value` (from `--set`).
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError::BadAssignment(assignment.to_string()))?;
        self.set_from(name.trim(), value, Origin::Set)
    }

    /// Applies every setting of the `--config` file: TOML when its name ends in
    /// `.toml`, otherwise a Java properties file (Kafka's `server.properties`).
    pub fn apply_file(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
        {
            self.apply_toml(path)
        } else {
            self.apply_properties(path)
        }
    }

    /// Applies every setting of a Java properties file, in file order.
    pub fn apply_properties(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let properties = crate::properties::parse(&text).map_err(|e| file_error(e.to_string()))?;
        for p in properties {
            let origin = Origin::File(format!("{}:{}", path.display(), p.line));
            self.set_from(&p.key, &p.value, origin)?;
        }
        Ok(())
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
        let origin = Origin::File(path.display().to_string());
        for (name, value) in flat {
            self.set_from(&name, &value, origin.clone())?;
        }
        Ok(())
    }

    /// Applies the variables that name a setting, `TIDELOG_<NAME>` with the setting's
    /// dots as underscores (`TIDELOG_LOG_RETENTION_MS`). Nothing else is read: other
    /// `TIDELOG_*` variables (the process flags', a test script's) are left alone and
    /// returned, sorted, so the caller can say they were not used.
    pub fn apply_env<I: IntoIterator<Item = (String, String)>>(
        &mut self,
        vars: I,
    ) -> Result<Vec<String>, ConfigError> {
        let mut ignored = Vec::new();
        for (key, value) in vars {
            let Some(rest) = key.strip_prefix("TIDELOG_") else {
                continue;
            };
            if RESERVED_ENV.contains(&key.as_str()) {
                continue;
            }
            let name = rest.to_ascii_lowercase().replace('_', ".");
            if settings::ALL.iter().any(|(k, _, _)| *k == name) {
                self.set_from(&name, &value, Origin::Env(key))?;
            } else {
                ignored.push(key);
            }
        }
        ignored.sort();
        Ok(ignored)
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
    pub fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str()))
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

    /// The text of a setting by name, also of a per-listener override
    /// (`listener.name.<name>.ssl.*`) that has no constant; `None` when never set and
    /// without a default.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(String::as_str)
    }
}

/// A count of hours or minutes in milliseconds; as Kafka, any negative count means
/// "forever" (-1).
pub(crate) fn synonym_ms(units: i64, unit_ms: i64) -> i64 {
    if units < 0 {
        -1
    } else {
        units.saturating_mul(unit_ms)
    }
}

/// Whether a setting's value is a secret (a private key, a password): DescribeConfigs
/// answers it as Kafka does a sensitive config, without the value.
pub fn is_sensitive(name: &str) -> bool {
    let base = listener_override(name).map_or(name, |(_, base)| base);
    base == settings::SSL_KEYSTORE_KEY.name
        || base.ends_with(".password")
        || base.ends_with("sasl.jaas.config")
}

/// The settings a listener may override with `listener.name.<listener>.<setting>`
/// besides every `ssl.*` one.
const LISTENER_SETTINGS: &[&str] = &[
    settings::SASL_ENABLED_MECHANISMS.name,
    settings::CONNECTIONS_MAX_REAUTH_MS.name,
    settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_URL.name,
    settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS.name,
    settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS.name,
    settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS.name,
    settings::SASL_OAUTHBEARER_EXPECTED_AUDIENCE.name,
    settings::SASL_OAUTHBEARER_EXPECTED_ISSUER.name,
    settings::SASL_OAUTHBEARER_SUB_CLAIM_NAME.name,
    settings::SASL_OAUTHBEARER_SCOPE_CLAIM_NAME.name,
    settings::SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS.name,
];

/// `listener.name.<listener>.<setting>` split into the listener name (upper case,
/// as listener names are compared) and the setting it overrides for that listener:
/// an `ssl.*` setting, one of [`LISTENER_SETTINGS`], a mechanism's JAAS config
/// (`<mechanism>.sasl.jaas.config`, e.g. `plain.sasl.jaas.config`), or a mechanism's
/// server callback handler (`oauthbearer.sasl.server.callback.handler.class`).
pub fn listener_override(name: &str) -> Option<(String, &str)> {
    let rest = name.strip_prefix("listener.name.")?;
    let (listener, base) = rest.split_once('.')?;
    let known = (base.starts_with("ssl.") && settings::ALL.iter().any(|(k, _, _)| *k == base))
        || LISTENER_SETTINGS.contains(&base)
        || [".sasl.jaas.config", ".sasl.server.callback.handler.class"]
            .iter()
            .filter_map(|suffix| base.strip_suffix(suffix))
            .any(|mechanism| crate::sasl::SaslMechanism::from_name(mechanism).is_some());
    (known && !listener.is_empty()).then(|| (listener.to_ascii_uppercase(), base))
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
            Err(ConfigError::Unknown { .. })
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
    fn kafka_names_are_honoured_converted_ignored_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "log.retention.hours=2\nlog.retention.minutes=30\nnum.io.threads=8\n\
             node.id=3\nlog.roll.hours=1\nremote.log.storage.system.enable=false\n",
        )
        .unwrap();
        let mut c = config();
        c.apply_file(&path).unwrap();
        // Minutes win over hours whatever the order; the setting itself over both.
        assert_eq!(c.get(settings::LOG_RETENTION_MS), 30 * 60_000);
        assert_eq!(c.get(settings::LOG_ROLL_MS), 3_600_000);
        c.set("log.retention.ms", "5000").unwrap();
        c.set("log.retention.hours", "9").unwrap();
        assert_eq!(c.get(settings::LOG_RETENTION_MS), 5000);
        assert_eq!(c.process_setting("node.id").map(|(v, _)| v), Some("3"));
        let ignored = c.ignored_settings();
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].name, "num.io.threads");
        assert_eq!(
            ignored[0].origin,
            Origin::File(format!("{}:3", path.display()))
        );
        let refused = c
            .set("remote.log.storage.system.enable", "true")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("tiered storage"), "{refused}");
        let bad = c.set("log.segment.bytes", "1").unwrap_err().to_string();
        assert!(bad.contains("at least"), "{bad}");
        c.set("group.min.session.timeout.ms", "9000000").unwrap();
        assert!(c.check_consistency().is_err());
    }

    #[test]
    fn environment_overrides_use_dots_and_only_setting_names_are_read() {
        let mut c = config();
        let ignored = c
            .apply_env(vec![
                ("TIDELOG_LOG_SEGMENT_BYTES".to_string(), "1024".to_string()),
                ("TIDELOG_DATA_DIR".to_string(), "/x".to_string()),
                (
                    "TIDELOG_BOOTSTRAP".to_string(),
                    "127.0.0.1:9092".to_string(),
                ),
                ("TIDELOG_QUORUM".to_string(), "1@127.0.0.1:9093".to_string()),
                ("TIDELOG_TEST_TIMEOUT".to_string(), "300".to_string()),
                ("TIDELOG_BENCH_MB".to_string(), "8".to_string()),
                ("HOME".to_string(), "/root".to_string()),
            ])
            .unwrap();
        assert_eq!(c.get(settings::LOG_SEGMENT_BYTES), 1024);
        assert_eq!(ignored, ["TIDELOG_BENCH_MB", "TIDELOG_TEST_TIMEOUT"]);
        assert_eq!(c.get(settings::NUM_PARTITIONS), 1);
    }

    #[test]
    fn per_listener_ssl_settings_are_accepted_and_secrets_are_sensitive() {
        let mut c = config();
        c.set("listener.name.external.ssl.client.auth", "required")
            .unwrap();
        assert_eq!(
            c.text("listener.name.external.ssl.client.auth"),
            Some("required")
        );
        assert_eq!(
            listener_override("listener.name.external.ssl.client.auth"),
            Some(("EXTERNAL".to_string(), "ssl.client.auth"))
        );
        assert!(c.set("listener.name.external.ssl.bogus", "x").is_err());
        assert!(c.set("listener.name.external.num.partitions", "1").is_err());
        assert!(is_sensitive("ssl.keystore.key"));
        assert!(is_sensitive("listener.name.ssl.ssl.key.password"));
        assert!(!is_sensitive("ssl.keystore.location"));
    }

    #[test]
    fn errors_name_where_the_value_came_from() {
        let mut c = config();
        let env = c
            .apply_env(vec![(
                "TIDELOG_NUM_PARTITIONS".to_string(),
                "many".to_string(),
            )])
            .unwrap_err()
            .to_string();
        assert!(
            env.contains("environment variable TIDELOG_NUM_PARTITIONS"),
            "{env}"
        );
        assert!(env.contains("`many`"), "{env}");
        let set = c.set_assignment("num.partition=2").unwrap_err().to_string();
        assert!(
            set.contains("unknown setting `num.partition` from --set"),
            "{set}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "\"num.partitions\" = \"x\"\n").unwrap();
        let file = c.apply_toml(&path).unwrap_err().to_string();
        assert!(
            file.contains(&format!("in config file {}", path.display())),
            "{file}"
        );
    }
}
