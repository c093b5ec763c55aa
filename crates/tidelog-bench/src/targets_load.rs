//! The targets that load one broker: T1 (with T7 from its CPU), T2, T3, T4, T5, T6.
//! Each returns its rows or an error; `targets::run` turns an error into failed rows.

use std::time::Duration;

use crate::broker::{metric_value, SpawnedBroker};
use crate::ceilings::Ceilings;
use crate::load::native_produce::{self, NativeProduceSpec, DEFAULT_IN_FLIGHT};
use crate::load::{self, admin, consume, e2e, produce};
use crate::report::{number, Figure};
use crate::stats::{median, LatencySummary};
use crate::targets::{list, omb_spec, produce_spec, Scale, Target};

pub(crate) const T1_TARGET: &str = "≥ 0.5 × min(loopback TCP, buffered write)";
pub(crate) const T2_TARGET: &str = "≥ 0.6 × loopback TCP";
pub(crate) const T4_TARGET: &str = "p99 ≤ 10 × loopback round trip";
pub(crate) const T5A_TARGET: &str = "≥ 0.7 × 1 MiB append+fdatasync MB/s";
pub(crate) const T5B_TARGET: &str = "≥ 10 × single-writer 4 KiB fdatasync rate (group commit)";
pub(crate) const T6_TARGET: &str = "≥ 500,000 records/s";
pub(crate) const T7_TARGET: &str = "≤ 1 core-second per GB";

/// T1 + T7: 1 KiB records, acks=1, 256 KiB batches; broker CPU per GB from /proc.
pub(crate) fn t1_t7(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    filled_topic: &mut Option<String>,
) -> anyhow::Result<Vec<Figure>> {
    let bootstrap = target.bootstrap.as_str();
    let mut t1 = Vec::new();
    let mut t7 = Vec::new();
    let mut load_cpu = 0.0;
    let mut load_bytes = 0u64;
    let mut load_seconds = 0.0;
    let mut native = Vec::new();
    let mut native_cpu = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let (mb_s, cpu) = native_produce_run(target, scale)?;
        native.push(mb_s);
        native_cpu.extend(cpu);
        let topic = load::fresh_topic("t1");
        admin::create_topic(bootstrap, &topic, 4, 1, &[])?;
        let cpu_before = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let load_before = crate::procfs::cpu_seconds(std::process::id());
        let result = produce::run(&produce_spec(bootstrap, &topic, 1024, scale.t1_records))?;
        let cpu_after = target.broker.and_then(SpawnedBroker::cpu_seconds);
        if let (Some(before), Some(after)) =
            (load_before, crate::procfs::cpu_seconds(std::process::id()))
        {
            load_cpu += after - before;
            load_bytes += result.bytes;
            load_seconds += result.seconds;
        }
        if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
            t7.push((after - before) / (result.bytes as f64 / 1e9));
        }
        t1.push(result.mb_s);
        if let Some(previous) = filled_topic.replace(topic) {
            admin::delete_topic(bootstrap, &previous);
        }
    }
    let t1_ceiling = c.loopback_tcp_mb_s.min(c.buffered_write_mb_s);
    let t7_figure = if t7.is_empty() {
        Figure::not_run(
            "T7",
            "broker CPU per GB in T1",
            "core-s/GB",
            T7_TARGET,
            "needs --spawn (the broker's /proc)",
        )
    } else {
        Figure::new(
            "T7",
            "broker CPU per GB ingested in T1",
            median(&t7),
            "core-s/GB",
        )
        .bound(1.0, true, T7_TARGET)
        .note(format!("runs {}", list(&t7)))
    };
    Ok(vec![
        Figure::new(
            "T1",
            "produce 1 KiB, acks=1, 256 KiB batches, 4 partitions",
            median(&t1),
            "MB/s",
        )
        .ceiling(t1_ceiling)
        .at_least_ratio(0.5, T1_TARGET)
        .note(format!(
            "{} records per run; runs {}; the load process (librdkafka producer) used {} core-s/GB, \
             {} % of its one core while producing; native load (workspace protocol code, one \
             256 KiB batch encoded once and re-sent, {DEFAULT_IN_FLIGHT} requests in flight): {} MB/s \
             = {} of the ceiling (runs {}), broker {} core-s/GB",
            scale.t1_records,
            list(&t1),
            number(load_cpu / (load_bytes as f64 / 1e9).max(f64::EPSILON)),
            number(100.0 * load_cpu / load_seconds.max(f64::EPSILON)),
            number(median(&native)),
            number(median(&native) / t1_ceiling.max(f64::EPSILON)),
            list(&native),
            if native_cpu.is_empty() {
                "-".to_string()
            } else {
                number(median(&native_cpu))
            },
        )),
        t7_figure,
    ])
}

/// T1's workload from the native reference producer at a fresh topic: MB/s, and the
/// broker's CPU seconds per GB when it was spawned.
fn native_produce_run(target: &Target<'_>, scale: &Scale) -> anyhow::Result<(f64, Option<f64>)> {
    let bootstrap = target.bootstrap.as_str();
    let batch_records = 256;
    let batches = (scale.t1_records / batch_records as u64).max(1);
    with_topic(bootstrap, "t1n", 4, &[], |topic| {
        let cpu_before = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let spec = NativeProduceSpec::new(bootstrap, topic, 1024, batch_records, batches);
        let result = native_produce::produce(&spec)?;
        let cpu_after = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let gb = (batches * batch_records as u64 * 1024) as f64 / 1e9;
        let cpu = cpu_before
            .zip(cpu_after)
            .map(|(before, after)| (after - before) / gb);
        Ok((result.mb_s, cpu))
    })
}

/// T2: read back T1's last topic, just written and so in the page cache.
pub(crate) fn t2(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    topic: Option<&str>,
) -> anyhow::Result<Vec<Figure>> {
    let topic = topic.ok_or_else(|| anyhow::anyhow!("T1 filled no topic to read"))?;
    let mut t2 = Vec::new();
    let mut native = Vec::new();
    let mut load_cpu = 0.0;
    let mut load_bytes = 0u64;
    let mut broker_cpu = Vec::new();
    let mut native_broker_cpu = Vec::new();
    let mut first_record_ms = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let broker_before = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let load_before = crate::procfs::cpu_seconds(std::process::id());
        let result = consume::run(&target.bootstrap, topic, Duration::from_secs(300))?;
        let load_after = crate::procfs::cpu_seconds(std::process::id());
        let broker_after = target.broker.and_then(SpawnedBroker::cpu_seconds);
        if let (Some(before), Some(after)) = (load_before, load_after) {
            load_cpu += after - before;
            load_bytes += result.bytes;
        }
        let gb = (result.bytes as f64 / 1e9).max(f64::EPSILON);
        broker_cpu.extend(broker_before.zip(broker_after).map(|(b, a)| (a - b) / gb));
        t2.push(result.mb_s);
        first_record_ms.push(result.first_record_after * 1e3);
        // The broker's own capacity beside the client-bound figure: a Fetch loop with
        // the workspace's protocol code that drops the record bytes unread.
        let broker_before = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let started = std::time::Instant::now();
        let mb_s =
            load::native_consume::consume(&target.bootstrap, topic, Duration::from_secs(300))?;
        let gb = (mb_s * started.elapsed().as_secs_f64() / 1e3).max(f64::EPSILON);
        let broker_after = target.broker.and_then(SpawnedBroker::cpu_seconds);
        native_broker_cpu.extend(broker_before.zip(broker_after).map(|(b, a)| (a - b) / gb));
        native.push(mb_s);
    }
    let native_mb_s = median(&native);
    let per_gb = |values: &[f64]| {
        if values.is_empty() {
            "-".to_string()
        } else {
            number(median(values))
        }
    };
    Ok(vec![Figure::new(
        "T2",
        "consume a page-cache-resident topic",
        median(&t2),
        "MB/s",
    )
    .ceiling(c.loopback_tcp_mb_s)
    .at_least_ratio(0.6, T2_TARGET)
    .note(format!(
        "runs {} (from the first record to the last; the first came {} ms after the start, \
         runs {}); the load process (librdkafka consumer, start-up included) used {} core-s/GB, the \
         broker {} core-s/GB served; native load (workspace protocol code, one Fetch in \
         flight, record bytes dropped unread): {} MB/s = {} of loopback TCP (runs {}), broker \
         {} core-s/GB served",
        list(&t2),
        number(median(&first_record_ms)),
        list(&first_record_ms),
        number(load_cpu / (load_bytes as f64 / 1e9).max(f64::EPSILON)),
        per_gb(&broker_cpu),
        number(native_mb_s),
        number(native_mb_s / c.loopback_tcp_mb_s.max(f64::EPSILON)),
        list(&native),
        per_gb(&native_broker_cpu),
    ))])
}

/// T3: OMB 1-topic-16-partitions-1kb at a fixed rate, end-to-end latency.
pub(crate) fn t3(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    curves: &mut Vec<(String, LatencySummary)>,
) -> anyhow::Result<Vec<Figure>> {
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    let mut rates = Vec::new();
    let mut last_curve = None;
    let mut splits = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let spec = omb_spec(&target.bootstrap, 16, scale.t3_rate, scale.t3_seconds)?;
        let result = e2e::run(&spec);
        admin::delete_topic(&target.bootstrap, &spec.topic);
        let result = result?;
        p50.push(result.latency.p50_us / 1e3);
        p99.push(result.latency.p99_us / 1e3);
        rates.push(result.achieved_rate);
        splits.push(format!(
            "producer (Produce) {}; consumer (Fetch) {}",
            result.producer, result.consumer
        ));
        last_curve = Some(result.latency);
    }
    if let Some(curve) = last_curve {
        curves.push((format!("e2e 16p 1kb @ {} msg/s", scale.t3_rate), curve));
    }
    let rtt_ms = c.loopback_rtt_us / 1e3;
    let name = format!(
        "1-topic-16-partitions-1kb at {} msg/s, acks=1",
        scale.t3_rate
    );
    Ok(vec![
        Figure::new("T3a", &format!("{name}: e2e p50"), median(&p50), "ms")
            .ceiling(rtt_ms)
            .bound(1.0, true, "p50 ≤ 1 ms")
            .note(format!(
                "runs {}; sender reached {} msg/s; ceiling is the loopback round trip",
                list(&p50),
                list(&rates)
            )),
        Figure::new("T3b", &format!("{name}: e2e p99"), median(&p99), "ms")
            .ceiling(rtt_ms)
            .bound(5.0, true, "p99 ≤ 5 ms")
            .note(format!(
                "runs {}; librdkafka's statistics per run: {}",
                list(&p99),
                splits.join(" | ")
            )),
    ])
}

/// T4: one small produce in flight at a time.
pub(crate) fn t4(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    curves: &mut Vec<(String, LatencySummary)>,
) -> anyhow::Result<Vec<Figure>> {
    let runs = scale.runs.max(1);
    let mut t4 = Vec::new();
    let mut p50 = Vec::new();
    let mut rtt_p50 = Vec::new();
    let mut rtt_p99 = Vec::new();
    for _ in 0..runs {
        let topic = load::fresh_topic("t4");
        admin::create_topic(&target.bootstrap, &topic, 1, 1, &[])?;
        let mut spec = produce_spec(&target.bootstrap, &topic, 100, scale.t4_pings);
        spec.one_in_flight = true;
        spec.linger_ms = 0;
        let result = produce::run(&spec);
        admin::delete_topic(&target.bootstrap, &topic);
        let result = result?;
        rtt_p50.extend(result.client_rtt_p50_us);
        rtt_p99.extend(result.client_rtt_p99_us);
        if let Some(latency) = result.latency {
            p50.push(latency.p50_us);
            t4.push(latency.p99_us);
            if t4.len() == runs {
                curves.push(("ping (produce, 1 in flight)".to_string(), latency));
            }
        }
    }
    Ok(vec![Figure::new(
        "T4",
        "ping: produce 100 B, one in flight, acks=1: p99",
        median(&t4),
        "µs",
    )
    .ceiling(c.loopback_rtt_us)
    .at_most_ratio(10.0, T4_TARGET)
    .note(format!(
        "{} pings per run; runs {}; p50 {} µs; librdkafka's request round trip \
         (request written to response read) p50 {} µs, p99 {} µs",
        scale.t4_pings,
        list(&t4),
        number(median(&p50)),
        number(median(&rtt_p50)),
        number(median(&rtt_p99)),
    ))])
}

/// T5: flush.messages=1 (fsync before ack): bulk MB/s, then 16 one-in-flight writers.
/// Each run also drives the same load at a topic without `flush.messages` (what the load
/// process delivers when the broker never syncs, the most T5 could show with it), and
/// the same work from the native reference producer (what the broker does with syncs
/// when the client costs almost nothing).
pub(crate) fn t5(target: &Target<'_>, c: &Ceilings, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let bootstrap = target.bootstrap.as_str();
    let fsync = [("flush.messages".to_string(), "1".to_string())];
    let mut t5a = Vec::new();
    let mut t5a_unsynced = Vec::new();
    let mut t5a_native = Vec::new();
    let mut t5b = Vec::new();
    let mut t5b_unsynced = Vec::new();
    let mut t5b_native = Vec::new();
    let mut syncs = SyncTally::default();
    let group_seconds = Duration::from_secs_f64(scale.t5_group_seconds);
    for _ in 0..scale.runs.max(1) {
        for (configs, out) in [(&fsync[..], &mut t5a), (&[][..], &mut t5a_unsynced)] {
            let result = with_topic(bootstrap, "t5a", 1, configs, |topic| {
                let mut spec = produce_spec(bootstrap, topic, 1024, scale.t5_records);
                spec.batch_size = 1 << 20;
                produce::run(&spec)
            })?;
            out.push(result.mb_s);
        }
        let native = with_topic(bootstrap, "t5an", 1, &fsync, |topic| {
            // 1,000 records: just under the 1 MiB max.message.bytes with their headers.
            let batches = (scale.t5_records / 1000).max(1);
            native_produce::produce(&NativeProduceSpec::new(
                bootstrap, topic, 1024, 1000, batches,
            ))
        })?;
        t5a_native.push(native.mb_s);

        for (configs, out) in [(&fsync[..], &mut t5b), (&[][..], &mut t5b_unsynced)] {
            let result = with_topic(bootstrap, "t5b", 1, configs, |topic| {
                let mut spec = produce_spec(bootstrap, topic, 100, u64::MAX / 2);
                spec.producers = 16;
                spec.one_in_flight = true;
                spec.linger_ms = 0;
                spec.duration = Some(group_seconds);
                produce::run(&spec)
            })?;
            out.push(result.records_s);
        }
        let before = flush_totals(target);
        let native = with_topic(bootstrap, "t5bn", 1, &fsync, |topic| {
            native_produce::produce(&NativeProduceSpec {
                duration: Some(group_seconds),
                connections: 16,
                in_flight: 1,
                ..NativeProduceSpec::new(bootstrap, topic, 100, 1, u64::MAX / 2)
            })
        })?;
        syncs.add(
            before,
            flush_totals(target),
            native.requests_s * group_seconds.as_secs_f64(),
        );
        syncs.seconds += group_seconds.as_secs_f64();
        t5b_native.push(native.requests_s);
    }
    let fsync_rate = c.fsync_4k_per_s.max(f64::EPSILON);
    Ok(vec![
        Figure::new(
            "T5a",
            "produce 1 KiB, flush.messages=1, 1 MiB batches",
            median(&t5a),
            "MB/s",
        )
        .ceiling(c.fsync_1m_mb_s)
        .at_least_ratio(0.7, T5A_TARGET)
        .note(format!(
            "{} records per run; runs {}; the same load without flush.messages: {} MB/s \
             (runs {}); native load (1,000-record batches, {DEFAULT_IN_FLIGHT} in flight) with \
             flush.messages=1: {} MB/s = {} of the ceiling (runs {})",
            scale.t5_records,
            list(&t5a),
            number(median(&t5a_unsynced)),
            list(&t5a_unsynced),
            number(median(&t5a_native)),
            number(median(&t5a_native) / c.fsync_1m_mb_s.max(f64::EPSILON)),
            list(&t5a_native),
        )),
        Figure::new(
            "T5b",
            "flush.messages=1, 16 producers one in flight: acked requests",
            median(&t5b),
            "req/s",
        )
        .ceiling(c.fsync_4k_per_s)
        .at_least_ratio(10.0, T5B_TARGET)
        .note(format!(
            "ceiling = one writer's fdatasyncs/s; runs {}; the same load without \
             flush.messages: {} req/s = {} × the ceiling (runs {}); native load (16 \
             connections, one 100 B record in flight on each) with flush.messages=1: {} \
             req/s = {} × the ceiling (runs {}){}",
            list(&t5b),
            number(median(&t5b_unsynced)),
            number(median(&t5b_unsynced) / fsync_rate),
            list(&t5b_unsynced),
            number(median(&t5b_native)),
            number(median(&t5b_native) / fsync_rate),
            list(&t5b_native),
            syncs.describe(),
        )),
    ])
}

/// The broker's fdatasync count and seconds so far (its `log_flush_seconds` histogram),
/// when it was spawned here.
fn flush_totals(target: &Target<'_>) -> Option<(f64, f64)> {
    let metrics = target.broker?.metrics()?;
    Some((
        metric_value(&metrics, "tidelog_log_flush_seconds_count")?,
        metric_value(&metrics, "tidelog_log_flush_seconds_sum")?,
    ))
}

/// The broker's fdatasyncs during T5b's native runs: how the acknowledged requests
/// divide into syncs, and how much of the time a sync was running.
#[derive(Default)]
struct SyncTally {
    syncs: f64,
    sync_seconds: f64,
    requests: f64,
    seconds: f64,
}

impl SyncTally {
    fn add(&mut self, before: Option<(f64, f64)>, after: Option<(f64, f64)>, requests: f64) {
        if let (Some((count0, sum0)), Some((count1, sum1))) = (before, after) {
            self.syncs += count1 - count0;
            self.sync_seconds += sum1 - sum0;
            self.requests += requests;
        }
    }

    fn describe(&self) -> String {
        if self.syncs <= 0.0 {
            return String::new();
        }
        format!(
            "; the broker's fdatasyncs in the native runs: {} of {} µs on average, {} requests \
             each, a sync running {} % of the time",
            number(self.syncs),
            number(1e6 * self.sync_seconds / self.syncs),
            number(self.requests / self.syncs),
            number(100.0 * self.sync_seconds / self.seconds.max(f64::EPSILON)),
        )
    }
}

/// Runs `load` at a fresh topic of `partitions` partitions with `configs`, and deletes
/// the topic afterwards whatever the outcome.
fn with_topic<T>(
    bootstrap: &str,
    workload: &str,
    partitions: i32,
    configs: &[(String, String)],
    load: impl FnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let topic = load::fresh_topic(workload);
    admin::create_topic(bootstrap, &topic, partitions, 1, configs)?;
    let result = load(&topic);
    admin::delete_topic(bootstrap, &topic);
    result
}

/// T6: 100-byte records.
pub(crate) fn t6(target: &Target<'_>, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let mut t6 = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let topic = load::fresh_topic("t6");
        admin::create_topic(&target.bootstrap, &topic, 4, 1, &[])?;
        let mut spec = produce_spec(&target.bootstrap, &topic, 100, scale.t6_records);
        spec.batch_size = 1 << 20;
        let result = produce::run(&spec);
        admin::delete_topic(&target.bootstrap, &topic);
        t6.push(result?.records_s);
    }
    Ok(vec![Figure::new(
        "T6",
        "produce 100 B records, acks=1",
        median(&t6),
        "records/s",
    )
    .bound(500_000.0, false, T6_TARGET)
    .note(format!("runs {}", list(&t6)))])
}
