//! `tidelog quota set|list|remove`: client quotas (AlterClientQuotas and
//! DescribeClientQuotas, as Kafka's `kafka-configs --alter --entity-type users
//! --entity-type clients --add-config producer_byte_rate=...`). An entity is a user,
//! a client-id, both, or an ip, each named or the default (`--user-default`).

use std::io::Write as _;

use anyhow::{bail, Context};
use serde_json::json;
use tidelog_client::{QuotaEntity, QuotaMatch};

use super::output::{print_json, OutputArgs};
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct QuotaArgs {
    #[command(subcommand)]
    command: QuotaCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum QuotaCommand {
    /// Set quotas of an entity: KEY=VALUE with producer_byte_rate, consumer_byte_rate,
    /// request_percentage, controller_mutation_rate (user, client-id) or
    /// connection_creation_rate (ip).
    Set {
        #[command(flatten)]
        entity: Entity,
        /// KEY=VALUE; repeatable.
        #[arg(required = true, value_parser = parse_setting)]
        quotas: Vec<(String, f64)>,
    },
    /// List quotas: every entity, or those matching the entity options (a type not
    /// given matches anything; with --strict, no other type).
    List {
        #[command(flatten)]
        entity: Entity,
        /// Only entities with exactly the types given.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Remove quotas of an entity: the keys named, or all it has.
    Remove {
        #[command(flatten)]
        entity: Entity,
        /// Keys to remove (none: every key the entity has).
        keys: Vec<String>,
    },
}

#[derive(clap::Args)]
struct Entity {
    /// The user (principal name, `alice` for User:alice).
    #[arg(long, conflicts_with = "user_default")]
    user: Option<String>,
    /// The default user quota (applies to each user without one of its own).
    #[arg(long)]
    user_default: bool,
    /// The client id.
    #[arg(long, conflicts_with = "client_id_default")]
    client_id: Option<String>,
    /// The default client-id quota.
    #[arg(long)]
    client_id_default: bool,
    /// A client IP address (connection_creation_rate only).
    #[arg(long, conflicts_with_all = ["ip_default", "user", "user_default", "client_id", "client_id_default"])]
    ip: Option<String>,
    /// The default IP quota.
    #[arg(long, conflicts_with_all = ["user", "user_default", "client_id", "client_id_default"])]
    ip_default: bool,
}

impl Entity {
    /// The entity as `(type, name)` pairs, `None` the default.
    fn parts(&self) -> QuotaEntity {
        let mut parts = Vec::new();
        let mut add = |kind: &str, name: &Option<String>, default: bool| {
            if name.is_some() || default {
                parts.push((kind.to_string(), name.clone()));
            }
        };
        add("user", &self.user, self.user_default);
        add("client-id", &self.client_id, self.client_id_default);
        add("ip", &self.ip, self.ip_default);
        parts
    }

    fn required(&self) -> anyhow::Result<QuotaEntity> {
        let parts = self.parts();
        if parts.is_empty() {
            bail!("name an entity: --user/--user-default, --client-id/--client-id-default, or --ip/--ip-default");
        }
        Ok(parts)
    }

    fn filter(&self) -> Vec<(String, QuotaMatch)> {
        self.parts()
            .into_iter()
            .map(|(kind, name)| {
                let m = name.map_or(QuotaMatch::Default, QuotaMatch::Exact);
                (kind, m)
            })
            .collect()
    }
}

fn parse_setting(text: &str) -> Result<(String, f64), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text}: expected KEY=VALUE"))?;
    let value: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{text}: {value} is not a number"))?;
    Ok((key.trim().to_string(), value))
}

fn entity_text(entity: &QuotaEntity) -> String {
    entity
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("<default>")))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn run(args: QuotaArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            QuotaCommand::Set { entity, quotas } => {
                let parts = entity.required()?;
                let ops: Vec<(String, Option<f64>)> =
                    quotas.iter().map(|(k, v)| (k.clone(), Some(*v))).collect();
                client
                    .alter_client_quotas(&parts, &ops)
                    .await
                    .with_context(|| format!("setting quotas of {}", entity_text(&parts)))?;
                for (key, value) in quotas {
                    println!("set {key}={value} for {}", entity_text(&parts));
                }
            }
            QuotaCommand::List {
                entity,
                strict,
                output,
            } => {
                let found = client
                    .describe_client_quotas(&entity.filter(), strict)
                    .await?;
                if output.json() {
                    let entities: Vec<_> = found
                        .iter()
                        .map(|e| {
                            let entity: serde_json::Map<String, serde_json::Value> = e
                                .entity
                                .iter()
                                .map(|(k, v)| (k.clone(), json!(v)))
                                .collect();
                            let quotas: serde_json::Map<String, serde_json::Value> = e
                                .values
                                .iter()
                                .map(|(k, v)| (k.clone(), json!(v)))
                                .collect();
                            json!({"entity": entity, "quotas": quotas})
                        })
                        .collect();
                    return print_json(&json!({ "quotas": entities }));
                }
                let mut out = std::io::stdout().lock();
                for e in &found {
                    let values: Vec<String> =
                        e.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    writeln!(out, "{}\t{}", entity_text(&e.entity), values.join(","))?;
                }
            }
            QuotaCommand::Remove { entity, keys } => {
                let parts = entity.required()?;
                let keys = if keys.is_empty() {
                    let filter: Vec<(String, QuotaMatch)> = entity.filter();
                    client
                        .describe_client_quotas(&filter, true)
                        .await?
                        .into_iter()
                        .filter(|e| e.entity == sorted(&parts))
                        .flat_map(|e| e.values.into_iter().map(|(k, _)| k))
                        .collect()
                } else {
                    keys
                };
                if keys.is_empty() {
                    bail!("{} has no quotas", entity_text(&parts));
                }
                let ops: Vec<(String, Option<f64>)> =
                    keys.iter().map(|k| (k.clone(), None)).collect();
                client
                    .alter_client_quotas(&parts, &ops)
                    .await
                    .with_context(|| format!("removing quotas of {}", entity_text(&parts)))?;
                for key in keys {
                    println!("removed {key} of {}", entity_text(&parts));
                }
            }
        }
        Ok(())
    })
}

fn sorted(parts: &QuotaEntity) -> QuotaEntity {
    let mut parts = parts.clone();
    parts.sort();
    parts
}
