//! The consume workload: read a filled topic from the beginning with one librdkafka
//! consumer (manual assignment, no group membership), until every record up to the high
//! watermark arrived.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, DefaultConsumerContext};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Serialize;

use super::{admin, base_config, progress};
use crate::stats::mb_per_s;

#[derive(Clone, Debug, Serialize)]
pub(crate) struct ConsumeResult {
    pub(crate) records: u64,
    /// Key plus value bytes delivered to the application.
    pub(crate) bytes: u64,
    /// From the first record delivered to the last: the rate is taken over the flow.
    pub(crate) seconds: f64,
    pub(crate) mb_s: f64,
    pub(crate) records_s: f64,
    /// From the start of reading to the first record: librdkafka's own start-up
    /// (offset lookup, then a fetch timer of its own), kept out of the rate.
    pub(crate) first_record_after: f64,
}

/// A consumer for `topic` assigned every partition at `offset`, without a group.
pub(crate) fn assigned_consumer(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    offset: Offset,
    low_latency: bool,
) -> anyhow::Result<BaseConsumer> {
    assigned_consumer_with(
        bootstrap,
        topic,
        partitions,
        offset,
        low_latency,
        DefaultConsumerContext,
    )
}

/// [`assigned_consumer`] with a client context (statistics, callbacks).
pub(crate) fn assigned_consumer_with<C: ConsumerContext + 'static>(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    offset: Offset,
    low_latency: bool,
    context: C,
) -> anyhow::Result<BaseConsumer<C>> {
    let mut config = base_config(bootstrap);
    // librdkafka refuses assign() without a group.id; with auto-commit off the group is
    // never joined, so the broker needs no group APIs.
    config
        .set("group.id", super::fresh_topic("group"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .set("queued.max.messages.kbytes", "262144")
        .set("check.crcs", "false");
    if low_latency {
        config
            .set("fetch.wait.max.ms", "100")
            .set("fetch.min.bytes", "1")
            .set("statistics.interval.ms", "1000");
    }
    super::extra_settings(&mut config, "BENCH_CONSUMER_SET");
    let consumer: BaseConsumer<C> = config.create_with_context(context)?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment.add_partition_offset(topic, partition, offset)?;
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Reads `topic` from the beginning to its current end; the rate is measured from the
/// first record delivered to the last.
pub(crate) fn run(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
) -> anyhow::Result<ConsumeResult> {
    let partitions = admin::partition_count(bootstrap, topic)?;
    let consumer = assigned_consumer(bootstrap, topic, partitions, Offset::Beginning, false)?;
    let mut expected = 0u64;
    for partition in 0..partitions {
        let (low, high) = consumer.fetch_watermarks(topic, partition, Duration::from_secs(10))?;
        expected += u64::try_from(high - low).map_err(|_| anyhow!("watermarks {low}..{high}"))?;
    }
    let bar = progress("consume", Some(expected));
    let mut records = 0u64;
    let mut bytes = 0u64;
    let start = Instant::now();
    let mut first_at = None;
    while records < expected {
        if start.elapsed() > timeout {
            bail!("consumed {records} of {expected} records in {timeout:?}");
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                first_at.get_or_insert_with(Instant::now);
                records += 1;
                bytes += (message.payload_len() + message.key().map_or(0, <[u8]>::len)) as u64;
                if records % 4096 == 0 {
                    bar.set_position(records);
                }
            }
            Some(Err(error)) => bail!("consume error: {error}"),
            None => {}
        }
    }
    let end = Instant::now();
    bar.finish_and_clear();
    let first_at = first_at.unwrap_or(end);
    let flowing = end.saturating_duration_since(first_at);
    Ok(ConsumeResult {
        records,
        bytes,
        seconds: flowing.as_secs_f64(),
        mb_s: mb_per_s(bytes, flowing),
        records_s: records as f64 / flowing.as_secs_f64().max(1e-9),
        first_record_after: first_at.saturating_duration_since(start).as_secs_f64(),
    })
}
