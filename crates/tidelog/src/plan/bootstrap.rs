//! `--bootstrap`: watch a running cluster for a window and report what it does, through
//! the ordinary client protocol (no metrics API needed): end offsets read twice give the
//! append rate, the tails of a few partitions give the message size, Metadata gives the
//! replication factor and broker count, DescribeConfigs gives `retention.ms`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tidelog_client::{Client, FetchOptions, OffsetSpec, TopicMetadata};

use super::observe::{Observed, TopicSample};

/// Records read back from the end of a partition to measure message size.
const SAMPLE_RECORDS_PER_PARTITION: i64 = 100;
/// Partitions per topic whose tails are read (the busiest ones).
const SAMPLED_PARTITIONS_PER_TOPIC: usize = 8;
/// Bytes one sampling fetch may return.
const SAMPLE_FETCH_BYTES: i32 = 1024 * 1024;
/// Partitions read per pass; past this the sampling itself would skew the window.
const MAX_PARTITIONS: usize = 20_000;
/// Time allowed for all the requests on top of the window itself.
const REQUEST_ALLOWANCE: Duration = Duration::from_secs(60);

/// Observes the cluster at `bootstrap` for `window`. Gives up after the window plus a
/// minute, so an unresponsive cluster cannot hang the command.
pub(crate) fn observe(bootstrap: &str, window: Duration) -> anyhow::Result<Observed> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    let limit = window.saturating_add(REQUEST_ALLOWANCE);
    runtime.block_on(async {
        match tokio::time::timeout(limit, collect(bootstrap, window)).await {
            Ok(observed) => observed,
            Err(_) => anyhow::bail!(
                "{bootstrap} did not finish answering within {} s",
                limit.as_secs()
            ),
        }
    })
}

async fn collect(bootstrap: &str, window: Duration) -> anyhow::Result<Observed> {
    let mut client = Client::connect_to(bootstrap)
        .await
        .with_context(|| format!("connecting to {bootstrap}"))?;
    let topics: Vec<TopicMetadata> = client
        .list_topics()
        .await
        .context("listing topics")?
        .into_iter()
        .filter(|topic| !topic.is_internal && !topic.name.starts_with("__"))
        .collect();
    let partitions: usize = topics.iter().map(|topic| topic.partitions.len()).sum();
    if partitions > MAX_PARTITIONS {
        anyhow::bail!(
            "{partitions} partitions is more than --bootstrap reads ({MAX_PARTITIONS}); \
             plan from assumptions instead"
        );
    }

    let first_pass = Instant::now();
    let before = end_offsets(&mut client, &topics).await?;
    wait_showing_progress(window, bootstrap).await;
    let window_seconds = first_pass.elapsed().as_secs_f64();
    let after = end_offsets(&mut client, &topics).await?;

    let mut samples = Vec::with_capacity(topics.len());
    for ((topic, before), after) in topics.iter().zip(&before).zip(&after) {
        samples.push(observe_topic(&mut client, topic, before, after).await?);
    }
    let brokers = client.cached_metadata().brokers.len();
    Ok(Observed {
        bootstrap: bootstrap.to_owned(),
        window_seconds,
        brokers: u32::try_from(brokers).unwrap_or(u32::MAX),
        topics: samples,
    })
}

/// The log end offset of every partition, topic by topic.
/// Sleeps through the window, with a progress line on a terminal's stderr once a second.
async fn wait_showing_progress(window: Duration, bootstrap: &str) {
    let mut progress = crate::cli::progress::Progress::new();
    let started = Instant::now();
    let total = window.as_secs_f64();
    loop {
        let elapsed = started.elapsed();
        if elapsed >= window {
            break;
        }
        progress.show(&format!(
            "watching {bootstrap}: {:.0}s of {total:.0}s",
            elapsed.as_secs_f64()
        ));
        tokio::time::sleep((window - elapsed).min(Duration::from_secs(1))).await;
    }
    progress.finish();
}

async fn end_offsets(
    client: &mut Client,
    topics: &[TopicMetadata],
) -> anyhow::Result<Vec<Vec<i64>>> {
    let mut all = Vec::with_capacity(topics.len());
    for topic in topics {
        let mut ends = Vec::with_capacity(topic.partitions.len());
        for partition in &topic.partitions {
            let end = client
                .list_offsets(&topic.name, partition.partition, OffsetSpec::Latest)
                .await
                .with_context(|| {
                    format!(
                        "reading the end offset of {}-{}",
                        topic.name, partition.partition
                    )
                })?;
            ends.push(end);
        }
        all.push(ends);
    }
    Ok(all)
}

async fn observe_topic(
    client: &mut Client,
    topic: &TopicMetadata,
    before: &[i64],
    after: &[i64],
) -> anyhow::Result<TopicSample> {
    let growth: Vec<(i32, i64, u64)> = topic
        .partitions
        .iter()
        .zip(before.iter().zip(after))
        .map(|(partition, (&before, &after))| {
            let grew = u64::try_from(after.saturating_sub(before)).unwrap_or(0);
            (partition.partition, after, grew)
        })
        .collect();
    let produced = growth.iter().map(|&(_, _, grew)| grew).sum();

    let mut busiest: Vec<&(i32, i64, u64)> = growth.iter().filter(|(_, end, _)| *end > 0).collect();
    busiest.sort_by_key(|entry| std::cmp::Reverse(entry.2));
    let mut sampled_records = 0;
    let mut sampled_bytes = 0;
    for &&(partition, end, _) in busiest.iter().take(SAMPLED_PARTITIONS_PER_TOPIC) {
        let (records, bytes) = sample_tail(client, &topic.name, partition, end).await?;
        sampled_records += records;
        sampled_bytes += bytes;
    }

    let replication_factor = topic
        .partitions
        .iter()
        .map(|partition| partition.replicas.len())
        .max()
        .unwrap_or(1);
    // A cluster that cannot describe configs still has rates worth planning from; the
    // plan then says retention was assumed.
    let retention_ms = client
        .describe_topic_configs(&topic.name)
        .await
        .ok()
        .and_then(|entries| {
            entries
                .into_iter()
                .find(|entry| entry.name == "retention.ms")
                .and_then(|entry| entry.value)
        })
        .and_then(|value| value.trim().parse::<i64>().ok());

    Ok(TopicSample {
        name: topic.name.clone(),
        partitions: u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX),
        replication_factor: u32::try_from(replication_factor).unwrap_or(u32::MAX),
        retention_ms,
        produced,
        sampled_records,
        sampled_bytes,
    })
}

/// Reads up to the last [`SAMPLE_RECORDS_PER_PARTITION`] records before `end` and
/// returns (records, key + value bytes).
async fn sample_tail(
    client: &mut Client,
    topic: &str,
    partition: i32,
    end: i64,
) -> anyhow::Result<(u64, u64)> {
    let start = client
        .list_offsets(topic, partition, OffsetSpec::Earliest)
        .await
        .with_context(|| format!("reading the start offset of {topic}-{partition}"))?;
    let from = end.saturating_sub(SAMPLE_RECORDS_PER_PARTITION).max(start);
    if from >= end {
        return Ok((0, 0));
    }
    let options = FetchOptions {
        max_wait: Duration::from_millis(100),
        min_bytes: 1,
        max_bytes: SAMPLE_FETCH_BYTES,
        partition_max_bytes: SAMPLE_FETCH_BYTES,
    };
    let fetched = client
        .fetch(topic, partition, from, &options)
        .await
        .with_context(|| format!("sampling records of {topic}-{partition}"))?;
    let mut records = 0u64;
    let mut bytes = 0u64;
    for record in fetched.records.iter().filter(|record| record.offset < end) {
        records += 1;
        let key = record.key.as_ref().map_or(0, |key| key.len());
        let value = record.value.as_ref().map_or(0, |value| value.len());
        bytes += u64::try_from(key + value).unwrap_or(u64::MAX);
    }
    Ok((records, bytes))
}
