//! `tidelog serve`: run one node until Ctrl-C or SIGTERM, then shut down cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use tidelog_broker::{Broker, BrokerConfig, ClusterOptions, ControllerNode, NodeFailure};
use tidelog_controller::quorum::QuorumPeers;

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// This node's id in the cluster.
    #[arg(long, env = "TIDELOG_NODE_ID", default_value = "1")]
    node_id: String,
    /// Kafka protocol listener (ip:port or localhost:port; one PLAINTEXT listener).
    #[arg(long, env = "TIDELOG_LISTEN", default_value = "127.0.0.1:9092")]
    listen: String,
    /// HTTP admin listener (/healthz, /readyz).
    #[arg(long, env = "TIDELOG_ADMIN_LISTEN", default_value = "127.0.0.1:9644")]
    admin_listen: String,
    /// Where partitions and metadata live.
    #[arg(long, env = "TIDELOG_DATA_DIR", default_value = "./tidelog-data")]
    data_dir: PathBuf,
    /// A file of Kafka-named settings: a Java properties file such as Kafka's
    /// `server.properties` (`log.retention.hours=168`), or TOML if its name ends in
    /// `.toml`. Flags and `--set` win over it.
    #[arg(long, env = "TIDELOG_CONFIG")]
    config: Option<PathBuf>,
    /// One Kafka-named setting, `name=value`; repeatable; wins over the file and environment.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// The controller voters of a cluster, `id@host:port,...` (the same list on every
    /// node). Without it the node is a cluster of one: the only voter of its own
    /// controller quorum, with no controller listener.
    #[arg(long, env = "TIDELOG_QUORUM", value_name = "ID@HOST:PORT,...")]
    quorum: Option<String>,
    /// Where this node's controller voter listens; its port must be the one of this
    /// node's entry in --quorum (the host may be 0.0.0.0). Default: that entry.
    #[arg(long, env = "TIDELOG_CONTROLLER_LISTEN", value_name = "HOST:PORT")]
    controller_listen: Option<String>,
    /// What this node runs with --quorum: `broker`, `controller` or `broker,controller`.
    /// Default: both when --node-id is a voter in --quorum, else `broker`.
    #[arg(
        long,
        env = "TIDELOG_ROLES",
        value_delimiter = ',',
        value_name = "ROLE,..."
    )]
    roles: Vec<String>,
}

impl ServeArgs {
    /// The flags a Kafka properties file may also give, for `kafka_process_settings`.
    fn as_process_flags(&mut self) -> crate::kafka_process_settings::ProcessFlags<'_> {
        crate::kafka_process_settings::ProcessFlags {
            quorum: &mut self.quorum,
            controller_listen: &mut self.controller_listen,
            roles: &mut self.roles,
        }
    }
}

/// Reads --quorum, --controller-listen and --roles into the cluster options, and
/// whether this node runs a broker.
fn cluster_options(
    args: &ServeArgs,
    node_id: i32,
) -> anyhow::Result<(Option<ClusterOptions>, bool)> {
    let Some(quorum) = &args.quorum else {
        if args.controller_listen.is_some() || !args.roles.is_empty() {
            bail!("--controller-listen and --roles need --quorum");
        }
        return Ok((None, true));
    };
    let peers = QuorumPeers::parse(quorum).with_context(|| format!("--quorum {quorum}"))?;
    let voter = peers.contains(node_id);
    let (mut broker, mut controller) = (args.roles.is_empty(), args.roles.is_empty() && voter);
    for role in &args.roles {
        match role.trim() {
            "broker" => broker = true,
            "controller" => controller = true,
            other => bail!("unknown role {other:?} in --roles (expected broker, controller)"),
        }
    }
    if controller && !voter {
        bail!("--roles controller: node {node_id} is not a voter in --quorum {quorum}");
    }
    let own = peers.address(node_id).map(str::to_owned);
    if let Some(listen) = &args.controller_listen {
        if !controller {
            bail!("--controller-listen is only for a node that runs a controller voter");
        }
        check_controller_listen(listen, own.as_deref().unwrap_or_default())?;
    }
    Ok((
        Some(ClusterOptions {
            peers,
            controller_listen: args.controller_listen.clone(),
            controller,
        }),
        broker,
    ))
}

/// The voter binds `listen`; the others reach it at `entry`. They must name the same
/// port, and the same host unless `listen` binds every interface.
fn check_controller_listen(listen: &str, entry: &str) -> anyhow::Result<()> {
    let listen_addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("--controller-listen {listen} is not an ip:port"))?;
    let (entry_host, entry_port) = entry.rsplit_once(':').unwrap_or((entry, ""));
    let entry_host = entry_host.trim_start_matches('[').trim_end_matches(']');
    let same_port = entry_port.parse::<u16>().ok() == Some(listen_addr.port());
    let same_host = listen_addr.ip().is_unspecified() || listen_addr.ip().to_string() == entry_host;
    if !same_port || !same_host {
        bail!("--controller-listen {listen} does not match this node's entry {entry} in --quorum");
    }
    Ok(())
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let node_id: i32 = flag_value(&args.node_id, "--node-id", "TIDELOG_NODE_ID", "an integer")?;
    let ListenAddr(listen) = flag_value(
        &args.listen,
        "--listen",
        "TIDELOG_LISTEN",
        "an ip:port or localhost:port",
    )?;
    let ListenAddr(admin_listen) = flag_value(
        &args.admin_listen,
        "--admin-listen",
        "TIDELOG_ADMIN_LISTEN",
        "an ip:port or localhost:port",
    )?;
    let mut config = BrokerConfig::new(node_id, listen, admin_listen, args.data_dir.clone());
    if let Some(path) = &args.config {
        config.apply_file(path)?;
    }
    for var in config.apply_env(std::env::vars())? {
        tracing::info!("environment variable {var} is not a tidelog setting; not read");
    }
    for assignment in &args.set {
        config.set_assignment(assignment)?;
    }
    for ignored in config.ignored_settings() {
        tracing::warn!(
            "setting {} {} is accepted for compatibility with Kafka and has no effect: {}",
            ignored.name,
            ignored.origin,
            ignored.why
        );
    }
    config.check_consistency()?;
    let mut args = args;
    crate::kafka_process_settings::apply(&mut config, &mut args.as_process_flags())?;
    let listen = config.listen;
    let (cluster, broker) = cluster_options(&args, config.node_id)?;
    if broker {
        // Before anything starts: the listeners, and what clients will be told to
        // connect to.
        let listeners = config.get(tidelog_broker::settings::LISTENERS);
        if !listeners.trim().is_empty()
            && crate::kafka_process_settings::explicit("--listen", "TIDELOG_LISTEN")
        {
            bail!(
                "--listen and the `listeners` setting both name the Kafka listeners: use one \
                 (--listen {listen} means listeners=PLAINTEXT://{listen})"
            );
        }
        let specs = config.listener_specs()?;
        config.inter_broker_listener(&specs, cluster.is_some())?;
        let ports: Vec<u16> = specs.iter().map(|s| s.bind.port()).collect();
        config.advertised_endpoints(&specs, &ports)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tidelog")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match (broker, cluster) {
            (false, Some(cluster)) => {
                let node = ControllerNode::start(config, cluster).await?;
                let failure = tokio::select! {
                    signal = wait_for_signal() => { signal?; None }
                    why = node.failed() => Some(why),
                };
                stopping(failure.as_deref());
                node.shutdown().await;
                stopped(failure)
            }
            (_, cluster) => {
                let broker = Broker::start_with(config, cluster).await?;
                let failure = tokio::select! {
                    signal = wait_for_signal() => { signal?; None }
                    why = broker.failed() => Some(why),
                };
                match failure {
                    None => {
                        stopping(None);
                        broker.shutdown().await;
                        Ok(())
                    }
                    Some(NodeFailure::ControllerVoter(why)) => {
                        stopping(Some(&why));
                        broker.shutdown_failed().await;
                        stopped(Some(why))
                    }
                    Some(NodeFailure::LogDir(failure)) => halt(&failure),
                }
            }
        }
    })
}

/// A listen address: an `ip:port`, or `localhost:port` for the IPv4 loopback (the form
/// `--bootstrap` takes), without a name lookup.
struct ListenAddr(SocketAddr);

impl std::str::FromStr for ListenAddr {
    type Err = std::net::AddrParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}").parse().map(ListenAddr),
            None => text.parse().map(ListenAddr),
        }
    }
}

/// Parses a flag's value; the error names where it came from (the flag, its
/// environment variable, or the default).
fn flag_value<T>(value: &str, flag: &str, env: &str, expected: &str) -> anyhow::Result<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value.trim().parse().map_err(|e| {
        let origin = if crate::kafka_process_settings::on_command_line(flag) {
            flag.to_owned()
        } else if std::env::var_os(env).is_some() {
            format!("environment variable {env}")
        } else {
            format!("the default of {flag}")
        };
        anyhow::anyhow!("{value:?} from {origin} is not {expected}: {e}")
    })
}

fn stopping(failure: Option<&str>) {
    match failure {
        None => tracing::info!("shutting down"),
        Some(why) => tracing::error!(
            error = why,
            "this node's controller voter stopped on an error (its metadata log or vote \
             could not be written); stopping the node so that it is restarted"
        ),
    }
}

/// Kafka's answer to a failed log directory on a broker that cannot move that one
/// directory's partitions elsewhere: exit at once, without closing the logs cleanly
/// (what they hold on disk is unknown, so the restart must recover them) and without
/// handing leaderships over (the controller fences the node once its heartbeats stop,
/// and the other replicas take over). Exit code 1, for a supervisor to restart it once
/// the disk is back.
fn halt(failure: &tidelog_broker::LogDirFailure) -> ! {
    tracing::error!(
        log_dir = %failure.log_dir.display(),
        error = %failure.error,
        "halting: a log directory failed; its logs are recovered at the next start"
    );
    eprintln!("error: halting: {failure}");
    std::process::exit(1)
}

/// A node stopped by its controller's failure exits non-zero, so a supervisor
/// (systemd's Restart=on-failure, a container's restart policy) starts it again.
fn stopped(failure: Option<String>) -> anyhow::Result<()> {
    match failure {
        None => Ok(()),
        Some(why) => anyhow::bail!("the controller voter failed: {why}"),
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// The subscriber, with its filter behind a reload handle so that Kafka's
/// BROKER_LOGGER configs (`tidelog_broker::log_levels`) change levels while it runs.
fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::EnvFilter;

    let (directives, filter) = match std::env::var("TIDELOG_LOG")
        .ok()
        .and_then(|d| EnvFilter::try_new(&d).ok().map(|f| (d, f)))
    {
        Some(taken) => taken,
        None => {
            let d = tidelog_broker::log_levels::DEFAULT_FILTER;
            (d.to_owned(), EnvFilter::new(d))
        }
    };
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    // Colour only for a person at a terminal, never into log files.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let fmt = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(ansi);
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        tidelog_broker::log_levels::install(&directives, move |d| {
            let filter = EnvFilter::try_new(d).map_err(|e| e.to_string())?;
            handle.reload(filter).map_err(|e| e.to_string())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_take_localhost_as_bootstrap_does() {
        let parse = |t: &str| t.parse::<ListenAddr>().map(|a| a.0);
        assert_eq!(parse("localhost:9092"), "127.0.0.1:9092".parse());
        assert_eq!(parse("0.0.0.0:1"), "0.0.0.0:1".parse());
        assert_eq!(parse("[::1]:9092"), "[::1]:9092".parse());
        assert!(parse("localhost:x").is_err());
        assert!(parse("broker1:9092").is_err());
    }
}
