//! Kafka's BROKER_LOGGER config resource (resource type 8): the level of each logger
//! of this node, described and changed while it runs (DescribeConfigs and
//! IncrementalAlterConfigs, `kafka-configs --entity-type broker-loggers`), with the
//! checks and messages of Kafka's `ConfigAdminManager`. A logger is a tracing target,
//! a module path such as `tidelog_broker::replica`; `root` is the level of everything
//! else. As in Kafka, levels set this way are not kept: a restart starts from the
//! filter the process was started with (`TIDELOG_LOG`).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::poison::LockTolerant;
use kafka_protocol::error::ResponseError;

/// Kafka's name of the logger every other one inherits from.
pub const ROOT: &str = "root";

/// Kafka's log levels, what tracing calls each, and the order Kafka lists them in.
const LEVELS: &[(&str, &str)] = &[
    ("DEBUG", "debug"),
    ("ERROR", "error"),
    ("FATAL", "error"),
    ("INFO", "info"),
    ("TRACE", "trace"),
    ("WARN", "warn"),
];

/// The loggers described: the crates and the broker's parts. Any module path below one
/// of these is a logger too (tracing matches a target by its prefix).
const LOGGERS: &[&str] = &[
    "openraft",
    "tidelog",
    "tidelog_broker",
    "tidelog_broker::admin_http",
    "tidelog_broker::apis",
    "tidelog_broker::coordinator",
    "tidelog_broker::group",
    "tidelog_broker::metadata",
    "tidelog_broker::net",
    "tidelog_broker::quota",
    "tidelog_broker::replica",
    "tidelog_broker::sasl",
    "tidelog_broker::server",
    "tidelog_broker::share",
    "tidelog_broker::tls",
    "tidelog_broker::txn",
    "tidelog_client",
    "tidelog_controller",
    "tidelog_sasl",
    "tidelog_storage",
];

/// What the process starts with when `TIDELOG_LOG` is not set.
pub const DEFAULT_FILTER: &str = "info,openraft=warn";

/// Installs a new filter (tracing's directive syntax); an error says why it could not.
type Apply = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// This process's logger levels and the way to change its filter.
pub struct LogLevels {
    state: Mutex<State>,
}

struct State {
    /// tracing's level of `root`.
    root: String,
    /// Logger -> tracing's level.
    levels: BTreeMap<String, String>,
    /// Directives of the start-up filter that are not `target=level` (span or field
    /// filters), kept as they were.
    other: Vec<String>,
    apply: Option<Apply>,
}

static PROCESS: OnceLock<LogLevels> = OnceLock::new();

/// Called once by the binary once its subscriber runs with `filter` (tracing's
/// directives, e.g. `info,openraft=warn`); `apply` installs a new filter. Without it
/// (tests that start a broker in-process) levels are kept but change nothing.
pub fn install(filter: &str, apply: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static) {
    let levels = LogLevels::parse(filter, Some(Box::new(apply)));
    // A second call (never made) keeps the first.
    let _ = PROCESS.set(levels);
}

/// The levels of this process.
pub(crate) fn process() -> &'static LogLevels {
    PROCESS.get_or_init(|| LogLevels::parse(DEFAULT_FILTER, None))
}

/// One entry of an IncrementalAlterConfigs of the BROKER_LOGGER resource.
pub(crate) struct LevelChange {
    pub(crate) logger: String,
    /// Kafka's operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
    pub(crate) op: i8,
    pub(crate) level: Option<String>,
}

type Refusal = (i16, String);

/// A BROKER_LOGGER resource is named by this node's id, as Kafka requires.
pub(crate) fn check_resource_name(name: &str, node_id: i32) -> Result<(), Refusal> {
    let invalid = |m: String| Err((ResponseError::InvalidRequest.code(), m));
    if name.is_empty() {
        return invalid("Broker id must not be empty".into());
    }
    match name.parse::<i32>() {
        Err(_) => invalid(format!("Broker id must be an integer, but it is: {name}")),
        Ok(id) if id != node_id => invalid(format!(
            "Unexpected broker id, expected {node_id}, but received {name}"
        )),
        Ok(_) => Ok(()),
    }
}

impl LogLevels {
    fn parse(filter: &str, apply: Option<Apply>) -> LogLevels {
        let mut state = State {
            root: "info".to_owned(),
            levels: BTreeMap::new(),
            other: Vec::new(),
            apply,
        };
        for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let level = |s: &str| {
                let s = s.to_ascii_lowercase();
                LEVELS.iter().any(|(_, t)| *t == s).then_some(s)
            };
            match directive.split_once('=') {
                None => match level(directive) {
                    Some(l) => state.root = l,
                    None if is_module_path(directive) => {
                        // A bare target means every level of it.
                        state
                            .levels
                            .insert(directive.to_owned(), "trace".to_owned());
                    }
                    None => state.other.push(directive.to_owned()),
                },
                Some((target, l)) if is_module_path(target) && level(l).is_some() => {
                    state
                        .levels
                        .insert(target.to_owned(), level(l).unwrap_or_default());
                }
                Some(_) => state.other.push(directive.to_owned()),
            }
        }
        LogLevels {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Every logger with its level, in Kafka's terms: `root` first, then the known
    /// loggers and any other set, each at its own level or the nearest ancestor's.
    pub(crate) fn describe(&self) -> Vec<(String, String)> {
        let state = self.lock();
        let mut names: Vec<&str> = LOGGERS.to_vec();
        names.extend(state.levels.keys().map(String::as_str));
        names.sort_unstable();
        names.dedup();
        let mut out = vec![(ROOT.to_owned(), kafka_level(&state.root))];
        out.extend(
            names
                .into_iter()
                .map(|name| (name.to_owned(), kafka_level(state.effective(name)))),
        );
        out
    }

    /// Checks `changes` as Kafka does, then (unless `validate_only`) applies them all.
    pub(crate) fn alter(
        &self,
        changes: &[LevelChange],
        validate_only: bool,
    ) -> Result<(), Refusal> {
        let mut levels = {
            let state = self.lock();
            (state.root.clone(), state.levels.clone())
        };
        for change in changes {
            check(change)?;
            let tracing_level = change.level.as_deref().and_then(tracing_level);
            match (change.op, tracing_level) {
                (SET, Some(l)) if change.logger == ROOT => levels.0 = l.to_owned(),
                (SET, Some(l)) => {
                    levels.1.insert(change.logger.clone(), l.to_owned());
                }
                _ => {
                    levels.1.remove(&change.logger);
                }
            }
        }
        if validate_only {
            return Ok(());
        }
        let mut state = self.lock();
        (state.root, state.levels) = levels;
        let filter = state.filter();
        if let Some(apply) = &state.apply {
            apply(&filter).map_err(|e| {
                (
                    ResponseError::InvalidConfig.code(),
                    format!("the new log filter {filter} was not taken: {e}"),
                )
            })?;
        }
        tracing::info!(%filter, "log levels changed (BROKER_LOGGER)");
        Ok(())
    }
}

impl State {
    /// The level of `logger`: its own, else its nearest ancestor's, else the root's.
    fn effective(&self, logger: &str) -> &str {
        let mut name = logger;
        loop {
            if let Some(level) = self.levels.get(name) {
                return level;
            }
            match name.rsplit_once("::") {
                Some((parent, _)) => name = parent,
                None => return &self.root,
            }
        }
    }

    /// tracing's filter of these levels.
    fn filter(&self) -> String {
        let mut directives = vec![self.root.clone()];
        directives.extend(self.levels.iter().map(|(t, l)| format!("{t}={l}")));
        directives.extend(self.other.iter().cloned());
        directives.join(",")
    }
}

const SET: i8 = 0;
const DELETE: i8 = 1;

/// Kafka's `ConfigAdminManager.validateLogLevelConfigs`.
fn check(change: &LevelChange) -> Result<(), Refusal> {
    let invalid_request = |m: String| Err((ResponseError::InvalidRequest.code(), m));
    let invalid_config = |m: String| Err((ResponseError::InvalidConfig.code(), m));
    let logger = &change.logger;
    match change.op {
        SET => {
            let level = change.level.as_deref().unwrap_or_default();
            if tracing_level(level).is_none() {
                let valid: Vec<&str> = LEVELS.iter().map(|(k, _)| *k).collect();
                return invalid_config(format!(
                    "Cannot set the log level of {logger} to {level} as it is not a supported log level. Valid log levels are {}",
                    valid.join(", ")
                ));
            }
        }
        DELETE if logger == ROOT => {
            return invalid_request(format!(
                "Removing the log level of the {ROOT} logger is not allowed"
            ));
        }
        DELETE => {}
        2 => {
            return invalid_request(
                "APPEND operation is not allowed for the BROKER_LOGGER resource".into(),
            )
        }
        3 => {
            return invalid_request(
                "SUBTRACT operation is not allowed for the BROKER_LOGGER resource".into(),
            )
        }
        op => return invalid_request(format!("Unknown config operation type {op}")),
    }
    if logger != ROOT && !is_logger(logger) {
        return invalid_config(format!("Logger {logger} does not exist!"));
    }
    Ok(())
}

/// tracing's level for Kafka's `level` (Kafka's names are upper case).
fn tracing_level(level: &str) -> Option<&'static str> {
    LEVELS.iter().find(|(k, _)| *k == level).map(|(_, t)| *t)
}

/// Kafka's name of tracing's `level`.
fn kafka_level(level: &str) -> String {
    LEVELS
        .iter()
        .find(|(k, t)| *t == level && *k != "FATAL")
        .map_or_else(|| level.to_ascii_uppercase(), |(k, _)| (*k).to_owned())
}

/// A known logger or a module path below one.
fn is_logger(name: &str) -> bool {
    is_module_path(name)
        && LOGGERS.iter().any(|l| {
            name == *l
                || name
                    .strip_prefix(l)
                    .is_some_and(|rest| rest.starts_with("::"))
        })
}

fn is_module_path(name: &str) -> bool {
    !name.is_empty()
        && name.split("::").all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn set(logger: &str, level: &str) -> LevelChange {
        LevelChange {
            logger: logger.into(),
            op: SET,
            level: Some(level.into()),
        }
    }

    fn level_of(levels: &LogLevels, logger: &str) -> String {
        let described = levels.describe();
        described
            .into_iter()
            .find(|(name, _)| name == logger)
            .map(|(_, level)| level)
            .unwrap_or_default()
    }

    #[test]
    fn the_start_up_filter_is_described_and_loggers_inherit() {
        let levels = LogLevels::parse(
            "warn,tidelog_broker=debug,tidelog_broker::net[conn]=trace",
            None,
        );
        assert_eq!(level_of(&levels, ROOT), "WARN");
        assert_eq!(level_of(&levels, "tidelog_broker::replica"), "DEBUG");
        assert_eq!(level_of(&levels, "openraft"), "WARN");
        assert_eq!(levels.lock().other, vec!["tidelog_broker::net[conn]=trace"]);
    }

    #[test]
    fn a_change_installs_the_new_filter_and_a_delete_falls_back_to_the_parent() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let levels = LogLevels::parse(
            DEFAULT_FILTER,
            Some(Box::new(move |f: &str| {
                sink.locked().push(f.to_owned());
                Ok(())
            })),
        );
        levels
            .alter(
                &[set("tidelog_broker::net", "TRACE"), set(ROOT, "WARN")],
                false,
            )
            .expect("valid changes");
        assert_eq!(level_of(&levels, "tidelog_broker::net"), "TRACE");
        let delete = LevelChange {
            logger: "tidelog_broker::net".into(),
            op: DELETE,
            level: None,
        };
        levels.alter(&[delete], false).expect("delete");
        assert_eq!(level_of(&levels, "tidelog_broker::net"), "WARN");
        let seen = seen.locked().clone();
        assert_eq!(
            seen,
            vec![
                "warn,openraft=warn,tidelog_broker::net=trace",
                "warn,openraft=warn"
            ]
        );
    }

    #[test]
    fn kafkas_refusals() {
        let levels = LogLevels::parse(DEFAULT_FILTER, None);
        let code = |changes: &[LevelChange]| levels.alter(changes, false).map_err(|e| e.0);
        assert_eq!(
            code(&[set(ROOT, "LOUD")]),
            Err(ResponseError::InvalidConfig.code())
        );
        assert_eq!(
            code(&[set(ROOT, "debug")]),
            Err(ResponseError::InvalidConfig.code())
        );
        assert_eq!(
            code(&[set("kafka.server", "DEBUG")]),
            Err(ResponseError::InvalidConfig.code())
        );
        let root_delete = LevelChange {
            logger: ROOT.into(),
            op: DELETE,
            level: None,
        };
        assert_eq!(
            code(&[root_delete]),
            Err(ResponseError::InvalidRequest.code())
        );
        let append = LevelChange {
            logger: "tidelog".into(),
            op: 2,
            level: Some("DEBUG".into()),
        };
        assert_eq!(code(&[append]), Err(ResponseError::InvalidRequest.code()));
        // validate_only checks and changes nothing; a refusal anywhere changes nothing.
        levels
            .alter(&[set("tidelog_storage", "DEBUG")], true)
            .expect("valid");
        assert_eq!(level_of(&levels, "tidelog_storage"), "INFO");
        assert!(levels
            .alter(&[set("tidelog_storage", "DEBUG"), set(ROOT, "NO")], false)
            .is_err());
        assert_eq!(level_of(&levels, "tidelog_storage"), "INFO");
    }
}
