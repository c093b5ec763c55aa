//! Topic creation through the Kafka admin API (CreateTopics), then a wait until every
//! partition has a leader in Metadata, so the load never measures auto-creation; and
//! deletion once a run is measured.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use super::base_config;

/// Creates `topic` with `partitions` partitions, replication factor `replication` and
/// topic-level `configs`; returns once Metadata shows every partition led.
///
/// Every topic the bench makes is thrown away after its run, so it also asks for
/// `file.delete.delay.ms=0`: a broker that keeps a deleted partition's files for the
/// usual minute keeps their dirty pages too, and the next run would meet them (see
/// [`delete_topic`]). A broker that does not know the setting is asked again without it.
pub(crate) fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let mut with_delay = configs.to_vec();
    with_delay.push(("file.delete.delay.ms".to_string(), "0".to_string()));
    match request_create(bootstrap, topic, partitions, replication, &with_delay)? {
        Ok(()) => {}
        Err(RDKafkaErrorCode::InvalidConfig) => {
            match request_create(bootstrap, topic, partitions, replication, configs)? {
                Ok(()) => {}
                Err(code) => bail!("CreateTopics {topic}: {code}"),
            }
        }
        Err(code) => bail!("CreateTopics {topic}: {code}"),
    }
    // A minute, plus a few milliseconds per partition for the very large topics of
    // T11 (a node creates each partition's directory and files).
    let per_partition = Duration::from_millis(3) * u32::try_from(partitions).unwrap_or(0);
    wait_for_leaders(
        bootstrap,
        topic,
        partitions,
        Duration::from_secs(60) + per_partition,
    )
}

/// One CreateTopics; the outer error is the request's, the inner the topic's code.
fn request_create(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
    configs: &[(String, String)],
) -> anyhow::Result<Result<(), RDKafkaErrorCode>> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .context("creating the admin client")?;
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    for (name, value) in configs {
        new_topic = new_topic.set(name, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = runtime
        .block_on(admin.create_topics([&new_topic], &options))
        .context("CreateTopics")?;
    for result in results {
        if let Err((_, code)) = result {
            return Ok(Err(code));
        }
    }
    Ok(Ok(()))
}

/// Deletes `topic` (DeleteTopics) once a run has been measured, so every run starts with
/// the same page cache. Kept, earlier runs' unwritten data piles up past the kernel's
/// dirty limits, and from then on every `write()` is throttled to this disk's sustained
/// speed (about 370 MB/s here, against 1.5–4 GB/s into free page cache): later runs
/// would measure that, not the broker (docs/performance.md, "T10's slow runs").
/// Deleting a file drops its dirty pages unwritten. A failure is reported on stderr and
/// does not fail the row: the figure is already taken.
pub(crate) fn delete_topic(bootstrap: &str, topic: &str) {
    if let Err(e) = try_delete_topic(bootstrap, topic) {
        eprintln!("warning: deleting topic {topic} after its run: {e:#}");
    }
}

fn try_delete_topic(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .context("creating the admin client")?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = runtime
        .block_on(admin.delete_topics(&[topic], &options))
        .context("DeleteTopics")?;
    for result in results {
        if let Err((name, code)) = result {
            bail!("DeleteTopics {name}: {code}");
        }
    }
    Ok(())
}

fn wait_for_leaders(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> anyhow::Result<()> {
    let client: BaseConsumer = base_config(bootstrap).create()?;
    let start = Instant::now();
    let mut last = String::from("no answer");
    while start.elapsed() < timeout {
        match client.fetch_metadata(Some(topic), Duration::from_secs(10)) {
            Ok(metadata) => {
                let led = metadata
                    .topics()
                    .iter()
                    .filter(|t| t.name() == topic && t.error().is_none())
                    .flat_map(|t| t.partitions())
                    .filter(|p| p.error().is_none() && p.leader() >= 0)
                    .count();
                if led == usize::try_from(partitions).unwrap_or(0) {
                    return Ok(());
                }
                last = format!("{led} of {partitions} partitions led");
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(anyhow!("topic {topic} not ready after {timeout:?}: {last}"))
}

/// The partition count of an existing topic.
pub(crate) fn partition_count(bootstrap: &str, topic: &str) -> anyhow::Result<i32> {
    let client: BaseConsumer = base_config(bootstrap).create()?;
    let metadata = client.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let count = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map(|t| t.partitions().len())
        .ok_or_else(|| anyhow!("topic {topic} not in metadata"))?;
    Ok(i32::try_from(count)?)
}
