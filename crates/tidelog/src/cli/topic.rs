//! `tidelog topic`: create, list, describe, alter-config and delete topics.

use std::io::Write;

use anyhow::{bail, Context};
use tidelog_client::{Client, ConfigOp, NewTopic, OffsetSpec};

use super::{parse_key_value, ConnectArgs};

#[derive(clap::Args)]
pub(crate) struct TopicArgs {
    #[command(subcommand)]
    command: TopicCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        /// Topic name.
        name: String,
        /// Number of partitions (default: the broker's num.partitions).
        #[arg(long)]
        partitions: Option<i32>,
        /// Copies of each partition (default: the broker's default.replication.factor).
        #[arg(long)]
        replication_factor: Option<i16>,
        /// A topic config, name=value; repeatable.
        #[arg(long = "config", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// List topics with their partition counts.
    List {
        /// Include internal topics (__consumer_offsets, ...).
        #[arg(long)]
        internal: bool,
    },
    /// Show partitions (leader, replicas, ISR, offsets) and configs of a topic.
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete a topic and its data.
    Delete {
        /// Topic name.
        name: String,
    },
    /// Set or remove topic config overrides.
    AlterConfig {
        /// Topic name.
        name: String,
        /// Set a config, name=value; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Remove an override (back to the default); repeatable.
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
    },
    /// Grow a topic to a total number of partitions.
    AddPartitions {
        /// Topic name.
        name: String,
        /// The new total partition count.
        #[arg(long)]
        total: i32,
    },
}

pub(crate) fn run(args: TopicArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            TopicCommand::Create {
                name,
                partitions,
                replication_factor,
                configs,
            } => {
                let topic = NewTopic {
                    name: name.clone(),
                    partitions: partitions.unwrap_or(-1),
                    replication_factor: replication_factor.unwrap_or(-1),
                    configs,
                };
                client.create_topic(&topic).await?;
                println!("created topic {name}");
            }
            TopicCommand::List { internal } => list(&mut client, internal).await?,
            TopicCommand::Describe { name } => describe(&mut client, &name).await?,
            TopicCommand::Delete { name } => {
                client.delete_topic(&name).await?;
                println!("deleted topic {name}");
            }
            TopicCommand::AlterConfig { name, set, delete } => {
                if set.is_empty() && delete.is_empty() {
                    bail!("nothing to change: give --set name=value and/or --delete name");
                }
                let ops: Vec<ConfigOp> = set
                    .into_iter()
                    .map(|(k, v)| ConfigOp::Set(k, v))
                    .chain(delete.into_iter().map(ConfigOp::Delete))
                    .collect();
                client.alter_topic_configs(&name, &ops).await?;
                println!("altered configs of topic {name}");
            }
            TopicCommand::AddPartitions { name, total } => {
                client.create_partitions(&name, total).await?;
                println!(
                    "topic {name} now has {}",
                    super::count(usize::try_from(total).unwrap_or(0), "partition")
                );
            }
        }
        Ok(())
    })
}

async fn list(client: &mut Client, internal: bool) -> anyhow::Result<()> {
    let topics = client.list_topics().await?;
    let mut out = std::io::stdout().lock();
    let mut listed = 0;
    for t in topics.iter().filter(|t| internal || !t.is_internal) {
        writeln!(
            out,
            "{}\t{}",
            t.name,
            super::count(t.partitions.len(), "partition")
        )?;
        listed += 1;
    }
    if listed == 0 {
        // On stderr: a script reading the list still gets an empty one.
        eprintln!("no topics");
    }
    Ok(())
}

fn ids(v: &[i32]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

async fn describe(client: &mut Client, name: &str) -> anyhow::Result<()> {
    client.invalidate_topic(name);
    let topic = client.topic(name, false).await?;
    let replication = topic.partitions.first().map_or(0, |p| p.replicas.len());
    let mut text = format!(
        "Topic: {}\tTopicId: {}\tPartitions: {}\tReplicationFactor: {}\n",
        topic.name,
        topic.topic_id,
        topic.partitions.len(),
        replication
    );
    text.push_str("Partition\tLeader\tReplicas\tISR\tEarliest\tLatest\n");
    for p in &topic.partitions {
        let offsets = if p.leader >= 0 {
            let earliest = client
                .list_offsets(name, p.partition, OffsetSpec::Earliest)
                .await;
            let latest = client
                .list_offsets(name, p.partition, OffsetSpec::Latest)
                .await;
            match (earliest, latest) {
                (Ok(e), Ok(l)) => format!("{e}\t{l}"),
                (Err(e), _) | (_, Err(e)) => format!("?\t? ({e})"),
            }
        } else {
            "-\t-".into()
        };
        let leader = if p.leader >= 0 {
            p.leader.to_string()
        } else {
            "none".into()
        };
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            p.partition,
            leader,
            ids(&p.replicas),
            ids(&p.isr),
            offsets
        ));
    }
    let configs = client
        .describe_topic_configs(name)
        .await
        .with_context(|| format!("describing configs of topic {name}"))?;
    text.push_str("Configs (* = set on this topic):\n");
    for c in configs {
        let mark = if c.is_topic_override() { "*" } else { " " };
        let value = if c.sensitive {
            "(sensitive)".to_owned()
        } else {
            c.value.unwrap_or_else(|| "(null)".into())
        };
        text.push_str(&format!("  {mark} {}={value}\n", c.name));
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
