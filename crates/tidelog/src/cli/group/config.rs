//! `tidelog group config get|set|delete`: a group's configs (KIP-848), its own values
//! and the broker defaults it falls back to.

use serde_json::json;
use tidelog_client::Client;

use super::super::broker_config::source_name;
use super::super::output::{print_json, OutputArgs};
use super::super::parse_key_value;

#[derive(clap::Subcommand)]
pub(crate) enum GroupConfigCommand {
    /// Show every group config of a group with where its value comes from
    /// (GROUP_CONFIG: the group's own; DEFAULT_CONFIG: the broker's).
    Get {
        /// Group id.
        group: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Set group configs, name=value (checked against the broker's bounds).
    Set {
        /// Group id.
        group: String,
        /// name=value; one or more.
        #[arg(required = true, value_name = "NAME=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// Remove group configs (the group falls back to the broker's defaults).
    Delete {
        /// Group id.
        group: String,
        /// Config names; one or more.
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
    },
}

pub(crate) async fn run(client: &mut Client, command: GroupConfigCommand) -> anyhow::Result<()> {
    match command {
        GroupConfigCommand::Get { group, output } => {
            let configs = client.describe_group_configs(&group).await?;
            if output.json() {
                let configs: Vec<_> = configs
                    .iter()
                    .map(|c| {
                        json!({ "name": c.name, "value": c.value, "source": source_name(c.source) })
                    })
                    .collect();
                return print_json(&json!({ "group": group, "configs": configs }));
            }
            for c in &configs {
                let value = c.value.as_deref().unwrap_or("");
                println!("{}={}\t{}", c.name, value, source_name(c.source));
            }
        }
        GroupConfigCommand::Set { group, configs } => {
            let ops = super::super::config_ops(configs, Vec::new())?;
            client.alter_group_configs(&group, &ops).await?;
            println!("altered configs of group {group}");
        }
        GroupConfigCommand::Delete { group, names } => {
            let ops = super::super::config_ops(Vec::new(), names)?;
            client.alter_group_configs(&group, &ops).await?;
            println!("deleted configs of group {group}");
        }
    }
    Ok(())
}
