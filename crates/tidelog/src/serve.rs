//! `tidelog serve`: run one node until Ctrl-C or SIGTERM, then shut down cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tidelog_broker::{Broker, BrokerConfig};

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// This node's id in the cluster.
    #[arg(long, env = "TIDELOG_NODE_ID", default_value_t = 1)]
    node_id: i32,
    /// Kafka protocol listener.
    #[arg(long, env = "TIDELOG_LISTEN", default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// HTTP admin listener (/healthz, /readyz).
    #[arg(long, env = "TIDELOG_ADMIN_LISTEN", default_value = "127.0.0.1:9644")]
    admin_listen: SocketAddr,
    /// Where partitions and metadata live.
    #[arg(long, env = "TIDELOG_DATA_DIR", default_value = "./tidelog-data")]
    data_dir: PathBuf,
    /// A TOML file of Kafka-named settings (e.g. `"log.retention.ms" = 3600000`).
    #[arg(long, env = "TIDELOG_CONFIG")]
    config: Option<PathBuf>,
    /// One Kafka-named setting, `name=value`; repeatable; wins over the file and environment.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let mut config = BrokerConfig::new(args.node_id, args.listen, args.admin_listen, args.data_dir);
    if let Some(path) = &args.config {
        config.apply_toml(path)?;
    }
    config.apply_env(std::env::vars())?;
    for assignment in &args.set {
        config.set_assignment(assignment)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tidelog")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let broker = Broker::start(config).await?;
        wait_for_signal().await?;
        tracing::info!("shutting down");
        broker.shutdown().await;
        Ok(())
    })
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

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIDELOG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a person at a terminal, never into log files.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .try_init();
}
