//! `tidelog broker-config`: describe and alter dynamic broker configs (Kafka's
//! KIP-226, what `kafka-configs --entity-type brokers` does): of one broker
//! (`--broker ID`) or the cluster-wide default (`--broker-defaults`). They take effect
//! without a restart and are kept in the metadata log.

use serde_json::json;

use super::output::{print_json, OutputArgs};
use super::{parse_key_value, ConnectArgs};

#[derive(clap::Args)]
pub(crate) struct BrokerConfigArgs {
    #[command(subcommand)]
    command: BrokerConfigCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Args, Clone, Copy)]
#[group(required = true, multiple = false)]
struct Target {
    /// One broker's configs (its dynamic configs beat the cluster-wide default).
    #[arg(long, value_name = "ID")]
    broker: Option<i32>,
    /// The cluster-wide default of every broker.
    #[arg(long)]
    broker_defaults: bool,
}

#[derive(clap::Subcommand)]
enum BrokerConfigCommand {
    /// Show a broker's configs with where each value comes from, or the cluster-wide
    /// dynamic defaults that are set.
    Describe {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Set or remove dynamic configs.
    Alter {
        #[command(flatten)]
        target: Target,
        /// Set a config, name=value; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Remove a dynamic config (back to the next level); repeatable.
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
    },
}

/// Kafka's ConfigSource ids, as operators read them.
pub(crate) fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

pub(crate) fn run(args: BrokerConfigArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            BrokerConfigCommand::Describe { target, output } => {
                let configs = match target.broker {
                    Some(id) => client.describe_broker_configs(id).await?,
                    None => client.describe_broker_default_configs().await?,
                };
                if output.json() {
                    let configs: Vec<_> = configs
                        .iter()
                        .map(|c| {
                            json!({
                                "name": c.name, "value": c.value, "sensitive": c.sensitive,
                                "read_only": c.read_only, "source": source_name(c.source),
                            })
                        })
                        .collect();
                    return print_json(&json!({ "configs": configs }));
                }
                for c in &configs {
                    let value = if c.sensitive {
                        "(sensitive)"
                    } else {
                        c.value.as_deref().unwrap_or("")
                    };
                    let mode = if c.read_only { "read-only" } else { "dynamic" };
                    println!("{}={}\t{}\t{}", c.name, value, source_name(c.source), mode);
                }
            }
            BrokerConfigCommand::Alter {
                target,
                set,
                delete,
            } => {
                let ops = super::config_ops(set, delete)?;
                client.alter_broker_configs(target.broker, &ops).await?;
                match target.broker {
                    Some(id) => println!("altered dynamic configs of broker {id}"),
                    None => println!("altered the cluster-wide dynamic broker configs"),
                }
            }
        }
        Ok(())
    })
}
