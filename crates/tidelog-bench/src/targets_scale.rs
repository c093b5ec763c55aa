//! T11: the design chapter's partition counts on one node (issue 22, target 5).
//!
//! One topic of `t11_partitions` partitions on a fresh broker, then one of
//! `t11_many_partitions` on another, each under the spawn options' open-file limit
//! (`--broker-nofile 20000` for the figures): the topic is created, one
//! librdkafka producer sends one record to every partition, Metadata for the topic is
//! timed, the broker is stopped cleanly and restarted, every partition gets one more
//! record, and the broker is killed with SIGKILL and restarted.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::broker::{SpawnOptions, SpawnedBroker};
use crate::load::{self, admin, base_config, produce};
use crate::report::{number, Figure};
use crate::targets::Scale;

pub(crate) const T11_PRODUCE: &str = "< 2 s";
pub(crate) const T11_METADATA: &str = "< 50 ms";
pub(crate) const T11_SHUTDOWN: &str = "< 5 s";
pub(crate) const T11_RESTART: &str = "< 2 s";
pub(crate) const T11_RSS: &str = "RSS ≤ 1 GiB";

/// Metadata requests timed per measurement (the median is reported).
const METADATA_SAMPLES: usize = 7;

/// What one partition count measured.
struct Run {
    partitions: i32,
    create_s: f64,
    produce_s: f64,
    /// Seconds the broker spent in Produce requests (from its /metrics), and how many.
    produce_broker_s: f64,
    produce_requests: f64,
    acked: u64,
    metadata_ms: f64,
    rss_mb: f64,
    descriptors: f64,
    limit: String,
    shutdown_s: f64,
    clean_restart_s: f64,
    produce_again_s: f64,
    metadata_after_restart_ms: f64,
    crash_restart_s: f64,
}

fn measure(options: &SpawnOptions, partitions: i32) -> anyhow::Result<Run> {
    let mut broker = SpawnedBroker::start(options.clone())?;
    let bootstrap = broker.bootstrap();
    let topic = load::fresh_topic("t11");
    let started = Instant::now();
    admin::create_topic(&bootstrap, &topic, partitions, 1, &[])
        .with_context(|| format!("creating {partitions} partitions"))?;
    let create_s = started.elapsed().as_secs_f64();

    let before = produce_time(&broker);
    let started = Instant::now();
    let acked = produce::touch_partitions(&bootstrap, &topic, partitions)?;
    let produce_s = started.elapsed().as_secs_f64();
    let after = produce_time(&broker);
    let produce_broker_s = after.0 - before.0;
    let produce_requests = after.1 - before.1;
    let metadata_ms = metadata_median_ms(&bootstrap, &topic, partitions)?;
    // Let the broker settle (allocator caches, idle timers) before reading its RSS.
    std::thread::sleep(Duration::from_secs(1));
    let rss_mb = broker.rss_bytes().map_or(f64::NAN, |b| b as f64 / 1e6);
    let descriptors = broker
        .pid()
        .and_then(crate::procfs::open_fds)
        .map_or(f64::NAN, |f| f as f64);
    let limit = broker
        .pid()
        .and_then(crate::procfs::max_open_files)
        .map_or("unknown".to_string(), |l| l.to_string());

    let shutdown_s = broker.stop_clean()?.as_secs_f64();
    let clean_restart_s = broker.restart(Duration::from_secs(300))?.as_secs_f64();
    let metadata_after_restart_ms = metadata_median_ms(&bootstrap, &topic, partitions)?;
    // Unflushed writes to every partition, so the restart after SIGKILL recovers them.
    let started = Instant::now();
    produce::touch_partitions(&bootstrap, &topic, partitions)?;
    let produce_again_s = started.elapsed().as_secs_f64();
    broker.kill_hard()?;
    let crash_restart_s = broker.restart(Duration::from_secs(300))?.as_secs_f64();
    Ok(Run {
        partitions,
        create_s,
        produce_s,
        produce_broker_s,
        produce_requests,
        acked,
        metadata_ms,
        rss_mb,
        descriptors,
        limit,
        shutdown_s,
        clean_restart_s,
        produce_again_s,
        metadata_after_restart_ms,
        crash_restart_s,
    })
}

/// Total seconds and count of the Produce requests the broker answered so far.
fn produce_time(broker: &SpawnedBroker) -> (f64, f64) {
    let text = broker.metrics().unwrap_or_default();
    let value = |name: &str| {
        let key = format!("{name}{{api=\"Produce\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&key)?.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (
        value("tidelog_request_duration_seconds_sum"),
        value("tidelog_request_duration_seconds_count"),
    )
}

/// The median time of a Metadata request for `topic` alone, from one warmed-up client
/// (librdkafka's round trip, parsing the answer included).
fn metadata_median_ms(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<f64> {
    let client: BaseConsumer = base_config(bootstrap).create()?;
    let mut samples = Vec::with_capacity(METADATA_SAMPLES);
    for i in 0..=METADATA_SAMPLES {
        let started = Instant::now();
        let metadata = client.fetch_metadata(Some(topic), Duration::from_secs(30))?;
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        let seen = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map_or(0, |t| t.partitions().len());
        if seen != usize::try_from(partitions)? {
            return Err(anyhow!("Metadata listed {seen} of {partitions} partitions"));
        }
        // The first request also connects: not counted.
        if i > 0 {
            samples.push(elapsed);
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// The broker's own time in the Produce requests, when its /metrics answered.
fn broker_share(r: &Run) -> String {
    if r.produce_broker_s.is_finite() && r.produce_requests.is_finite() {
        format!(
            "; the broker spent {:.2} s in {} Produce requests",
            r.produce_broker_s, r.produce_requests
        )
    } else {
        String::new()
    }
}

fn scaled(scale: &Scale) -> String {
    if scale.t11_partitions == 16_384 && scale.t11_many_partitions == 49_152 {
        String::new()
    } else {
        " (scaled down: the target names 16,384 and 49,152)".to_string()
    }
}

/// The Metadata row, the same at both partition counts.
fn metadata_figure(id: &str, r: &Run, scaled: &str) -> Figure {
    let n = r.partitions;
    Figure::new(
        id,
        &format!("Metadata for a topic of {n} partitions"),
        r.metadata_ms,
        "ms",
    )
    .bound(50.0, true, T11_METADATA)
    .note(format!(
        "median of {METADATA_SAMPLES} from one client; {} ms after the clean restart{scaled}",
        number(r.metadata_after_restart_ms)
    ))
}

/// T11a–e at `t11_partitions`.
pub(crate) fn chapter(options: &SpawnOptions, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let r = measure(options, scale.t11_partitions.max(1))?;
    let n = r.partitions;
    let scaled = scaled(scale);
    Ok(vec![
        Figure::new("T11a", &format!("one record to each of {n} partitions"), r.produce_s, "s")
            .bound(2.0, true, T11_PRODUCE)
            .note(format!(
                "one librdkafka producer, acks=1, {} acked{}; the topic was created in {:.1} s; after the clean restart the same took {:.1} s{scaled}",
                r.acked, broker_share(&r), r.create_s, r.produce_again_s
            )),
        metadata_figure("T11b", &r, &scaled),
        Figure::new("T11c", &format!("clean shutdown, {n} partitions"), r.shutdown_s, "s")
            .bound(5.0, true, T11_SHUTDOWN)
            .note(format!(
                "SIGTERM to exit; RSS before it {} MB, {} descriptors, open-file limit {}{scaled}",
                number(r.rss_mb), number(r.descriptors), r.limit
            )),
        Figure::new("T11d", &format!("clean restart to ready, {n} partitions"), r.clean_restart_s, "s")
            .bound(2.0, true, T11_RESTART)
            .note(format!("process start to /readyz 200{scaled}")),
        Figure::new("T11e", &format!("restart after kill -9 to ready, {n} partitions"), r.crash_restart_s, "s")
            .bound(2.0, true, T11_RESTART)
            .note(format!("every partition holds an unflushed record; process start to /readyz 200{scaled}")),
    ])
}

/// T11f–j at `t11_many_partitions`, within the spawn options' open-file limit.
pub(crate) fn many(options: &SpawnOptions, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let n = scale.t11_many_partitions.max(1);
    let r = measure(options, n)?;
    let scaled = scaled(scale);
    let nofile = options
        .nofile
        .map_or("the default open-file limit".to_string(), |l| {
            format!("an open-file limit of {l}")
        });
    Ok(vec![
        Figure::new("T11f", &format!("{n} partitions accept a write"), r.acked as f64, "partitions")
            .bound(f64::from(n), false, "49,152 partitions within 20,000 open files")
            .note(format!(
                "under {nofile}: {} descriptors open (limit {}); created in {:.1} s, one record to each in {:.1} s, again after the clean restart in {:.1} s{scaled}",
                number(r.descriptors), r.limit, r.create_s, r.produce_s, r.produce_again_s
            )),
        Figure::new("T11g", &format!("RSS with {n} partitions"), r.rss_mb, "MB")
            .bound(1024.0 * 1.048_576, true, T11_RSS)
            .note(format!("each partition holds one 100 B record{scaled}")),
        metadata_figure("T11h", &r, &scaled),
        Figure::new("T11i", &format!("clean restart to ready, {n} partitions"), r.clean_restart_s, "s")
            .bound(2.0, true, T11_RESTART)
            .note(format!("the clean shutdown before it took {:.1} s{scaled}", r.shutdown_s)),
        Figure::new("T11j", &format!("restart after kill -9 to ready, {n} partitions"), r.crash_restart_s, "s")
            .bound(2.0, true, T11_RESTART)
            .note(format!("every partition holds an unflushed record{scaled}")),
    ])
}
