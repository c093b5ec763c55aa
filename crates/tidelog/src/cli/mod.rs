//! Client-side operator commands: they talk to a running cluster over the Kafka protocol.

pub(crate) mod acl;
pub(crate) mod broker_config;
pub(crate) mod cluster;
mod command_config;
pub(crate) mod consume;
pub(crate) mod format;
pub(crate) mod group;
pub(crate) mod output;
pub(crate) mod partition;
pub(crate) mod produce;
pub(crate) mod progress;
pub(crate) mod quota;
mod reassign_wait;
pub(crate) mod share_group;
pub(crate) mod topic;
pub(crate) mod user;
mod when;

use anyhow::Context;
use tidelog_client::{Client, ClientConfig, ConfigOp};

/// Where the cluster is; shared by every client command.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ConnectArgs {
    /// Bootstrap brokers, host:port[,host:port].
    #[arg(
        long,
        global = true,
        env = "TIDELOG_BOOTSTRAP",
        default_value = "127.0.0.1:9092"
    )]
    pub(crate) bootstrap: String,
    /// How long connecting and each admin request keep retrying what may pass (no
    /// broker listening yet, the controller moving, a leader being elected), across
    /// every bootstrap address, before the command fails (Kafka's
    /// default.api.timeout.ms).
    #[arg(
        long,
        global = true,
        env = "TIDELOG_API_TIMEOUT_MS",
        default_value_t = 60_000,
        value_name = "MS"
    )]
    pub(crate) api_timeout_ms: u64,
    /// Kafka client properties for a secured listener: security.protocol
    /// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), sasl.mechanism,
    /// sasl.username/sasl.password or sasl.jaas.config, ssl.ca.location (PEM),
    /// ssl.certificate.location and ssl.key.location.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) command_config: Option<std::path::PathBuf>,
}

impl ConnectArgs {
    /// Connects and loads the broker list; the error names the addresses tried.
    pub(crate) async fn connect(&self) -> anyhow::Result<Client> {
        let mut config = ClientConfig::new(&self.bootstrap)?;
        config.api_timeout = std::time::Duration::from_millis(self.api_timeout_ms);
        config.on_retry = Some(note_retry);
        if let Some(path) = &self.command_config {
            let security = command_config::load(path)?;
            config.connection.sasl = security.sasl;
            config.connection.tls = security.tls;
        }
        Client::connect(config).await.map_err(anyhow::Error::from)
    }
}

/// Tells the person at the terminal, once per command, what it is waiting for (the
/// retries themselves are silent).
fn note_retry(error: &tidelog_client::ClientError, _pause: std::time::Duration) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static NOTED: AtomicBool = AtomicBool::new(false);
    if !NOTED.swap(true, Ordering::Relaxed) {
        eprintln!("waiting for the cluster ({error}); retrying (--api-timeout-ms)");
    }
}

/// Client commands are I/O bound and sequential: one thread is enough.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Parses `name=value` (the value may itself contain `=`).
pub(crate) fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("expected name=value, got {s:?}")),
    }
}

/// The config changes of an `alter` command's `--set name=value` and `--delete name`
/// flags, refusing a command that changes nothing.
pub(crate) fn config_ops(
    set: Vec<(String, String)>,
    delete: Vec<String>,
) -> anyhow::Result<Vec<ConfigOp>> {
    if set.is_empty() && delete.is_empty() {
        anyhow::bail!("nothing to change: give --set name=value and/or --delete name");
    }
    Ok(set
        .into_iter()
        .map(|(k, v)| ConfigOp::Set(k, v))
        .chain(delete.into_iter().map(ConfigOp::Delete))
        .collect())
}

/// `1 partition`, `3 partitions`: a count with its noun, for people.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// True for the error writing to a closed pipe (`tidelog consume ... | head`): the reader
/// went away, which ends the command successfully.
pub(crate) fn is_broken_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_parsing() {
        assert_eq!(
            parse_key_value("retention.ms=1000"),
            Ok(("retention.ms".into(), "1000".into()))
        );
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=x").is_err());
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1, "partition"), "1 partition");
        assert_eq!(count(0, "partition"), "0 partitions");
        assert_eq!(count(3, "replica"), "3 replicas");
    }
}
