//! `targets`: the targets table (T1–T10) at sizes that finish in minutes,
//! each figure next to its ceiling from the same run, medians of `runs` runs.

use std::time::Duration;

use serde::Serialize;

use crate::broker::{SpawnOptions, SpawnedBroker};
use crate::ceilings::Ceilings;
use crate::load::{self, admin, consume, e2e, produce};
use crate::report::{number, Figure};
use crate::stats::{median, LatencySummary};

/// How big each target's workload is.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Scale {
    pub(crate) runs: usize,
    pub(crate) t1_records: u64,
    pub(crate) t3_seconds: f64,
    pub(crate) t3_rate: f64,
    pub(crate) t4_pings: u64,
    pub(crate) t5_records: u64,
    pub(crate) t5_group_seconds: f64,
    pub(crate) t6_records: u64,
    pub(crate) t8_idle_partitions: i32,
    pub(crate) t8_many_partitions: i32,
    pub(crate) t9_partitions: i32,
    pub(crate) t9_bytes: u64,
}

impl Scale {
    /// A few minutes on a 2-core machine.
    pub(crate) fn small() -> Self {
        Self {
            runs: 3,
            t1_records: 300_000,
            t3_seconds: 10.0,
            t3_rate: 50_000.0,
            t4_pings: 3_000,
            t5_records: 50_000,
            t5_group_seconds: 5.0,
            t6_records: 1_000_000,
            t8_idle_partitions: 1_000,
            t8_many_partitions: 10_000,
            t9_partitions: 1_000,
            t9_bytes: 1 << 30,
        }
    }

    /// Seconds: proves the tool runs end to end (CI), the figures mean nothing.
    pub(crate) fn tiny() -> Self {
        Self {
            runs: 1,
            t1_records: 2_000,
            t3_seconds: 1.5,
            t3_rate: 1_000.0,
            t4_pings: 50,
            t5_records: 200,
            t5_group_seconds: 0.5,
            t6_records: 5_000,
            t8_idle_partitions: 20,
            t8_many_partitions: 40,
            t9_partitions: 4,
            t9_bytes: 1 << 20,
        }
    }
}

/// Where the load goes, and (with `--spawn`) how to start fresh brokers for T8/T9.
pub(crate) struct Target<'a> {
    pub(crate) bootstrap: String,
    pub(crate) broker: Option<&'a SpawnedBroker>,
    pub(crate) spawn: Option<SpawnOptions>,
    /// Run only targets whose id starts with one of these (all when empty).
    pub(crate) only: Vec<String>,
}

impl Target<'_> {
    fn wants(&self, rows: &[Row]) -> bool {
        self.only.is_empty()
            || rows
                .iter()
                .any(|(id, ..)| self.only.iter().any(|o| id.starts_with(o.as_str())))
    }
}

/// Every target row plus the latency curves for the plot.
pub(crate) struct TargetsOutcome {
    pub(crate) figures: Vec<Figure>,
    pub(crate) curves: Vec<(String, LatencySummary)>,
}

/// A row the table promises even when its workload fails: id, workload, unit, target.
type Row = (&'static str, &'static str, &'static str, &'static str);

/// Appends a section's figures, or one failed row per promised id, so one broken
/// workload never costs the rest of the table. Prints the rows as they arrive.
fn section(
    target: &Target<'_>,
    figures: &mut Vec<Figure>,
    rows: &[Row],
    work: impl FnOnce() -> anyhow::Result<Vec<Figure>>,
) {
    if !target.wants(rows) {
        return;
    }
    let produced = match work() {
        Ok(produced) => produced,
        Err(error) => rows
            .iter()
            .map(|(id, workload, unit, target)| {
                Figure::not_run(id, workload, unit, target, "").note(format!("failed: {error:#}"))
            })
            .collect(),
    };
    eprint!("{}", crate::report::table(&produced));
    figures.extend(produced);
}

pub(crate) fn run(target: &Target<'_>, c: &Ceilings, scale: &Scale) -> TargetsOutcome {
    let mut figures = Vec::new();
    let mut curves = Vec::new();
    let mut filled_topic = None;
    section(
        target,
        &mut figures,
        &[
            ("T1", "produce 1 KiB, acks=1", "MB/s", T1_TARGET),
            (
                "T7",
                "broker CPU per GB ingested in T1",
                "core-s/GB",
                T7_TARGET,
            ),
        ],
        || t1_t7(target, c, scale, &mut filled_topic),
    );
    section(
        target,
        &mut figures,
        &[(
            "T2",
            "consume a page-cache-resident topic",
            "MB/s",
            T2_TARGET,
        )],
        || t2(target, c, scale, filled_topic.as_deref()),
    );
    section(
        target,
        &mut figures,
        &[
            (
                "T3a",
                "1-topic-16-partitions-1kb e2e p50",
                "ms",
                "p50 ≤ 1 ms",
            ),
            (
                "T3b",
                "1-topic-16-partitions-1kb e2e p99",
                "ms",
                "p99 ≤ 5 ms",
            ),
        ],
        || t3(target, c, scale, &mut curves),
    );
    section(
        target,
        &mut figures,
        &[("T4", "ping: produce 100 B, one in flight", "µs", T4_TARGET)],
        || t4(target, c, scale, &mut curves),
    );
    section(
        target,
        &mut figures,
        &[
            ("T5a", "produce 1 KiB, flush.messages=1", "MB/s", T5A_TARGET),
            ("T5b", "flush.messages=1, 16 producers", "req/s", T5B_TARGET),
        ],
        || t5(target, c, scale),
    );
    section(
        target,
        &mut figures,
        &[(
            "T6",
            "produce 100 B records, acks=1",
            "records/s",
            T6_TARGET,
        )],
        || t6(target, scale),
    );
    match &target.spawn {
        Some(options) => {
            section(
                target,
                &mut figures,
                &[
                    (
                        "T8a",
                        "RSS with idle partitions",
                        "MB",
                        "RSS ≤ 256 MB at 1,000 partitions",
                    ),
                    (
                        "T8b",
                        "many partitions accept a write",
                        "partitions",
                        "10,000 partitions work",
                    ),
                    (
                        "T8c",
                        "open files per partition",
                        "files",
                        "≤ 3 open files per partition replica",
                    ),
                ],
                || crate::targets_fleet::partitions(options, scale),
            );
            section(
                target,
                &mut figures,
                &[
                    ("T9a", "clean restart to ready", "s", "< 2 s"),
                    ("T9b", "restart after kill -9 to ready", "s", "< 30 s"),
                ],
                || crate::targets_fleet::restart(options, scale),
            );
        }
        None => {
            for (id, what, unit) in [
                ("T8a", "RSS with idle partitions", "MB"),
                ("T8b", "many partitions work", "partitions"),
                ("T8c", "open files per partition replica", "files"),
                ("T9a", "clean restart to ready", "s"),
                ("T9b", "restart after kill -9 to ready", "s"),
            ] {
                figures.push(Figure::not_run(
                    id,
                    what,
                    unit,
                    "see issue 7",
                    "needs --spawn (starts its own brokers)",
                ));
            }
        }
    }
    figures.push(Figure::not_run(
        "T10",
        "RF 3, acks=all, 3 local nodes",
        "MB/s",
        "≥ 0.3 × T1's throughput",
        "needs a 3-node cluster",
    ));
    TargetsOutcome { figures, curves }
}

const T1_TARGET: &str = "≥ 0.5 × min(loopback TCP, buffered write)";
const T2_TARGET: &str = "≥ 0.6 × loopback TCP";
const T4_TARGET: &str = "p99 ≤ 10 × loopback round trip";
const T5A_TARGET: &str = "≥ 0.7 × 1 MiB append+fdatasync MB/s";
const T5B_TARGET: &str = "≥ 10 × single-writer 4 KiB fdatasync rate (group commit)";
const T6_TARGET: &str = "≥ 500,000 records/s";
const T7_TARGET: &str = "≤ 1 core-second per GB";

/// T1 + T7: 1 KiB records, acks=1, 256 KiB batches; broker CPU per GB from /proc.
fn t1_t7(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    filled_topic: &mut Option<String>,
) -> anyhow::Result<Vec<Figure>> {
    let bootstrap = target.bootstrap.as_str();
    let mut t1 = Vec::new();
    let mut t7 = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let topic = load::fresh_topic("t1");
        admin::create_topic(bootstrap, &topic, 4, 1, &[])?;
        let cpu_before = target.broker.and_then(SpawnedBroker::cpu_seconds);
        let result = produce::run(&produce_spec(bootstrap, &topic, 1024, scale.t1_records))?;
        let cpu_after = target.broker.and_then(SpawnedBroker::cpu_seconds);
        if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
            t7.push((after - before) / (result.bytes as f64 / 1e9));
        }
        t1.push(result.mb_s);
        *filled_topic = Some(topic);
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
            "{} records per run; runs {}",
            scale.t1_records,
            list(&t1)
        )),
        t7_figure,
    ])
}

/// T2: read back T1's last topic, just written and so in the page cache.
fn t2(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    topic: Option<&str>,
) -> anyhow::Result<Vec<Figure>> {
    let topic = topic.ok_or_else(|| anyhow::anyhow!("T1 filled no topic to read"))?;
    let mut t2 = Vec::new();
    for _ in 0..scale.runs.max(1) {
        t2.push(consume::run(&target.bootstrap, topic, Duration::from_secs(300))?.mb_s);
    }
    Ok(vec![Figure::new(
        "T2",
        "consume a page-cache-resident topic",
        median(&t2),
        "MB/s",
    )
    .ceiling(c.loopback_tcp_mb_s)
    .at_least_ratio(0.6, T2_TARGET)
    .note(format!("runs {}", list(&t2)))])
}

/// T3: OMB 1-topic-16-partitions-1kb at a fixed rate, end-to-end latency.
fn t3(
    target: &Target<'_>,
    c: &Ceilings,
    scale: &Scale,
    curves: &mut Vec<(String, LatencySummary)>,
) -> anyhow::Result<Vec<Figure>> {
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    let mut rates = Vec::new();
    let mut last_curve = None;
    for _ in 0..scale.runs.max(1) {
        let result = e2e::run(&omb_spec(
            &target.bootstrap,
            16,
            scale.t3_rate,
            scale.t3_seconds,
        )?)?;
        p50.push(result.latency.p50_us / 1e3);
        p99.push(result.latency.p99_us / 1e3);
        rates.push(result.achieved_rate);
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
            .note(format!("runs {}", list(&p99))),
    ])
}

/// T4: one small produce in flight at a time.
fn t4(
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
        let result = produce::run(&spec)?;
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
fn t5(target: &Target<'_>, c: &Ceilings, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let bootstrap = target.bootstrap.as_str();
    let fsync_topic_config = [("flush.messages".to_string(), "1".to_string())];
    let mut t5a = Vec::new();
    let mut t5b = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let topic = load::fresh_topic("t5a");
        admin::create_topic(bootstrap, &topic, 1, 1, &fsync_topic_config)?;
        let mut spec = produce_spec(bootstrap, &topic, 1024, scale.t5_records);
        spec.batch_size = 1 << 20;
        t5a.push(produce::run(&spec)?.mb_s);

        let topic = load::fresh_topic("t5b");
        admin::create_topic(bootstrap, &topic, 1, 1, &fsync_topic_config)?;
        let mut spec = produce_spec(bootstrap, &topic, 100, u64::MAX / 2);
        spec.producers = 16;
        spec.one_in_flight = true;
        spec.linger_ms = 0;
        spec.duration = Some(Duration::from_secs_f64(scale.t5_group_seconds));
        t5b.push(produce::run(&spec)?.records_s);
    }
    Ok(vec![
        Figure::new(
            "T5a",
            "produce 1 KiB, flush.messages=1, 1 MiB batches",
            median(&t5a),
            "MB/s",
        )
        .ceiling(c.fsync_1m_mb_s)
        .at_least_ratio(0.7, T5A_TARGET)
        .note(format!("runs {}", list(&t5a))),
        Figure::new(
            "T5b",
            "flush.messages=1, 16 producers one in flight: acked requests",
            median(&t5b),
            "req/s",
        )
        .ceiling(c.fsync_4k_per_s)
        .at_least_ratio(10.0, T5B_TARGET)
        .note(format!(
            "ceiling = one writer's fdatasyncs/s; runs {}",
            list(&t5b)
        )),
    ])
}

/// T6: 100-byte records.
fn t6(target: &Target<'_>, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let mut t6 = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let topic = load::fresh_topic("t6");
        admin::create_topic(&target.bootstrap, &topic, 4, 1, &[])?;
        let mut spec = produce_spec(&target.bootstrap, &topic, 100, scale.t6_records);
        spec.batch_size = 1 << 20;
        t6.push(produce::run(&spec)?.records_s);
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

pub(crate) fn produce_spec(
    bootstrap: &str,
    topic: &str,
    record_size: usize,
    count: u64,
) -> produce::ProduceSpec {
    produce::ProduceSpec {
        bootstrap: bootstrap.to_string(),
        topic: topic.to_string(),
        record_size,
        count,
        duration: None,
        acks: "1".to_string(),
        linger_ms: 5,
        batch_size: 256 * 1024,
        compression: "none".to_string(),
        keyed: false,
        producers: 1,
        one_in_flight: false,
    }
}

/// The OpenMessaging Benchmark preset `1-topic-<partitions>-partitions-1kb`.
pub(crate) fn omb_spec(
    bootstrap: &str,
    partitions: i32,
    rate: f64,
    seconds: f64,
) -> anyhow::Result<e2e::E2eSpec> {
    let topic = load::fresh_topic(&format!("omb{partitions}"));
    admin::create_topic(bootstrap, &topic, partitions, 1, &[])?;
    Ok(e2e::E2eSpec {
        bootstrap: bootstrap.to_string(),
        topic,
        partitions,
        record_size: 1024,
        rate,
        duration: Duration::from_secs_f64(seconds),
        warmup: Duration::from_secs_f64((seconds / 5.0).min(2.0)),
        acks: "1".to_string(),
        linger_ms: 0,
    })
}

fn list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| crate::report::number(*v))
        .collect::<Vec<_>>()
        .join(", ")
}
