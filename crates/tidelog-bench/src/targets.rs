//! `targets`: the targets table (T1–T11) at sizes that finish in minutes,
//! each figure next to its ceiling from the same run, medians of `runs` runs.

use std::time::Duration;

use serde::Serialize;

use crate::broker::{SpawnOptions, SpawnedBroker};
use crate::ceilings::Ceilings;
use crate::load::{self, admin, e2e, produce};
use crate::report::Figure;
use crate::stats::LatencySummary;
use crate::targets_cluster::{T10_TARGET, T10_WORKLOAD};
use crate::targets_load::{
    t1_t7, t2, t3, t4, t5, t6, T1_TARGET, T2_TARGET, T4_TARGET, T5A_TARGET, T5B_TARGET, T6_TARGET,
    T7_TARGET,
};
use crate::targets_scale::{T11_METADATA, T11_PRODUCE, T11_RESTART, T11_RSS, T11_SHUTDOWN};

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
    /// T11: the design chapter's partition counts (one topic each).
    pub(crate) t11_partitions: i32,
    pub(crate) t11_many_partitions: i32,
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
            t5_records: 200_000,
            t5_group_seconds: 5.0,
            t6_records: 1_000_000,
            t8_idle_partitions: 1_000,
            t8_many_partitions: 10_000,
            t9_partitions: 1_000,
            t9_bytes: 1 << 30,
            t11_partitions: 16_384,
            t11_many_partitions: 49_152,
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
            t11_partitions: 64,
            t11_many_partitions: 192,
        }
    }
}

/// Where the load goes, and (with `--spawn`) how to start fresh brokers for T8/T9.
pub(crate) struct Target<'a> {
    pub(crate) bootstrap: String,
    pub(crate) broker: Option<&'a SpawnedBroker>,
    pub(crate) spawn: Option<SpawnOptions>,
    /// Run only these targets, by id or id prefix up to the letter (all when empty).
    pub(crate) only: Vec<String>,
}

impl Target<'_> {
    fn wants(&self, rows: &[Row]) -> bool {
        self.only.is_empty()
            || rows
                .iter()
                .any(|(id, ..)| self.only.iter().any(|o| selects(o, id)))
    }
}

/// `--only T3` selects T3a and T3b, but `--only T1` does not select T10.
fn selects(only: &str, id: &str) -> bool {
    id.strip_prefix(only)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_alphabetic()))
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

/// T11 at the chapter's first count (16,384 partitions in one topic).
const T11_CHAPTER_ROWS: [Row; 5] = [
    ("T11a", "one record to each partition", "s", T11_PRODUCE),
    ("T11b", "Metadata for the topic", "ms", T11_METADATA),
    ("T11c", "clean shutdown", "s", T11_SHUTDOWN),
    ("T11d", "clean restart to ready", "s", T11_RESTART),
    ("T11e", "restart after kill -9 to ready", "s", T11_RESTART),
];

/// T11 at three times that (49,152), within 20,000 open files.
const T11_MANY_ROWS: [Row; 5] = [
    (
        "T11f",
        "49,152 partitions accept a write",
        "partitions",
        "49,152 partitions within 20,000 open files",
    ),
    ("T11g", "RSS with 49,152 partitions", "MB", T11_RSS),
    ("T11h", "Metadata for the topic", "ms", T11_METADATA),
    ("T11i", "clean restart to ready", "s", T11_RESTART),
    ("T11j", "restart after kill -9 to ready", "s", T11_RESTART),
];

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
    if let Some(topic) = filled_topic.take() {
        admin::delete_topic(&target.bootstrap, &topic);
    }
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
            section(target, &mut figures, &T11_CHAPTER_ROWS, || {
                crate::targets_scale::chapter(options, scale)
            });
            section(target, &mut figures, &T11_MANY_ROWS, || {
                crate::targets_scale::many(options, scale)
            });
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
            for row in T11_CHAPTER_ROWS.iter().chain(&T11_MANY_ROWS) {
                let (id, what, unit, words) = *row;
                if target.wants(std::slice::from_ref(row)) {
                    figures.push(Figure::not_run(
                        id,
                        what,
                        unit,
                        words,
                        "needs --spawn (starts its own brokers)",
                    ));
                }
            }
        }
    }
    let t10_row = [("T10", T10_WORKLOAD, "MB/s", T10_TARGET)];
    match &target.spawn {
        Some(options) => {
            let t1_mb_s = figures.iter().find(|f| f.id == "T1").and_then(|f| f.value);
            section(target, &mut figures, &t10_row, || {
                crate::targets_cluster::t10(options, scale, t1_mb_s)
            });
        }
        None => figures.push(Figure::not_run(
            "T10",
            T10_WORKLOAD,
            "MB/s",
            T10_TARGET,
            "needs --spawn (starts its own 3-node cluster)",
        )),
    }
    TargetsOutcome { figures, curves }
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
        // OMB's Kafka driver runs the Java producer, whose default partitioner keeps
        // records without a key on one partition until a batch is full (KIP-480/794);
        // librdkafka does the same only when told to (it samples a random partition
        // per record when linger.ms is 0), and then sends one request per partition per
        // sender tick instead of one per tick: 2 ms is about one 128 KiB batch
        // (OMB's batch.size) at 50,000 × 1 KiB records/s.
        sticky_ms: Some(2),
    })
}

pub(crate) fn list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| crate::report::number(*v))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::selects;

    #[test]
    fn only_matches_ids_and_their_lettered_rows_but_not_longer_numbers() {
        assert!(selects("T1", "T1"));
        assert!(selects("T3", "T3a"));
        assert!(selects("T3", "T3b"));
        assert!(selects("T10", "T10"));
        assert!(!selects("T1", "T10"));
        assert!(!selects("T10", "T1"));
        assert!(!selects("T3a", "T3b"));
    }
}
