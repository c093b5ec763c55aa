//! `tidelog topic`: create, list, describe, alter-config and delete topics.

use std::io::Write;

use anyhow::Context;
use serde_json::json;
use tidelog_client::{Client, NewTopic, OffsetSpec};

use super::output::{print_json, OutputArgs};
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
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show partitions (leader, replicas, ISR, offsets) and configs of a topic.
    Describe {
        /// Topic name.
        name: String,
        #[command(flatten)]
        output: OutputArgs,
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
            TopicCommand::List { internal, output } => list(&mut client, internal, output).await?,
            TopicCommand::Describe { name, output } => describe(&mut client, &name, output).await?,
            TopicCommand::Delete { name } => {
                client.delete_topic(&name).await?;
                println!("deleted topic {name}");
            }
            TopicCommand::AlterConfig { name, set, delete } => {
                let ops = super::config_ops(set, delete)?;
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

async fn list(client: &mut Client, internal: bool, output: OutputArgs) -> anyhow::Result<()> {
    let topics = client.list_topics().await?;
    let listed: Vec<_> = topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .collect();
    if output.json() {
        let topics: Vec<_> = listed
            .iter()
            .map(|t| json!({"name": t.name, "partitions": t.partitions.len(), "internal": t.is_internal}))
            .collect();
        return print_json(&json!({ "topics": topics }));
    }
    let mut out = std::io::stdout().lock();
    for t in &listed {
        writeln!(
            out,
            "{}\t{}",
            t.name,
            super::count(t.partitions.len(), "partition")
        )?;
    }
    if listed.is_empty() {
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

/// Earliest and latest offset of a partition with a leader; the error text otherwise.
type Offsets = Option<Result<(i64, i64), String>>;

async fn describe(client: &mut Client, name: &str, output: OutputArgs) -> anyhow::Result<()> {
    client.invalidate_topic(name);
    let topic = client.topic(name, false).await?;
    let replication = topic.partitions.first().map_or(0, |p| p.replicas.len());
    let mut offsets: Vec<Offsets> = Vec::with_capacity(topic.partitions.len());
    for p in &topic.partitions {
        offsets.push(if p.leader >= 0 {
            let earliest = client
                .list_offsets(name, p.partition, OffsetSpec::Earliest)
                .await;
            let latest = client
                .list_offsets(name, p.partition, OffsetSpec::Latest)
                .await;
            Some(match (earliest, latest) {
                (Ok(e), Ok(l)) => Ok((e, l)),
                (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
            })
        } else {
            None
        });
    }
    let configs = client
        .describe_topic_configs(name)
        .await
        .with_context(|| format!("describing configs of topic {name}"))?;
    let shown = |c: &tidelog_client::ConfigEntry| {
        if c.sensitive {
            None
        } else {
            c.value.clone()
        }
    };
    if output.json() {
        let partitions: Vec<_> = topic
            .partitions
            .iter()
            .zip(&offsets)
            .map(|(p, o)| {
                let (earliest, latest, error) = match o {
                    Some(Ok((e, l))) => (Some(*e), Some(*l), None),
                    Some(Err(e)) => (None, None, Some(e.clone())),
                    None => (None, None, None),
                };
                json!({
                    "partition": p.partition, "leader": (p.leader >= 0).then_some(p.leader),
                    "replicas": p.replicas, "isr": p.isr,
                    "earliest_offset": earliest, "latest_offset": latest, "offsets_error": error,
                })
            })
            .collect();
        let configs: Vec<_> = configs
            .iter()
            .map(|c| json!({"name": c.name, "value": shown(c), "sensitive": c.sensitive, "set_on_topic": c.is_topic_override()}))
            .collect();
        return print_json(&json!({
            "name": topic.name, "topic_id": topic.topic_id.to_string(),
            "replication_factor": replication, "partitions": partitions, "configs": configs,
        }));
    }
    let mut text = format!(
        "Topic: {}\tTopicId: {}\tPartitions: {}\tReplicationFactor: {}\n",
        topic.name,
        topic.topic_id,
        topic.partitions.len(),
        replication
    );
    text.push_str("Partition\tLeader\tReplicas\tISR\tEarliest\tLatest\n");
    for (p, o) in topic.partitions.iter().zip(&offsets) {
        let offsets = match o {
            Some(Ok((e, l))) => format!("{e}\t{l}"),
            Some(Err(e)) => format!("?\t? ({e})"),
            None => "-\t-".into(),
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
    text.push_str("Configs (* = set on this topic):\n");
    for c in &configs {
        let mark = if c.is_topic_override() { "*" } else { " " };
        let value = if c.sensitive {
            "(sensitive)".to_owned()
        } else {
            shown(c).unwrap_or_else(|| "(null)".into())
        };
        text.push_str(&format!("  {mark} {}={value}\n", c.name));
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
