//! The share-group workload (KIP-932): more consumers than partitions. N consumers in
//! one share group read a filled topic until every record is accepted, against the same
//! N librdkafka consumers in a classic group, where only as many as there are
//! partitions get any.
//!
//! The share consumers are the workspace's own (`tidelog_client::groups::ShareConsumer`);
//! the classic ones are librdkafka's, as in the other workloads.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use tidelog_client::groups::{ShareConsumer, ShareConsumerConfig};
use tidelog_client::{Client, ConfigOp};

use super::base_config;
use crate::report::Figure;
use crate::stats::median;

pub(crate) struct ShareSpec {
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) consumers: usize,
    /// Records in the topic, all to be consumed.
    pub(crate) records: u64,
    pub(crate) timeout: Duration,
}

#[derive(Clone, Debug)]
pub(crate) struct ShareResult {
    pub(crate) records_s: f64,
    /// Records acquired with a delivery count above 1, over the records in the topic.
    pub(crate) redelivery_rate: f64,
    /// Consumers that acquired at least one record.
    pub(crate) consumers_served: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct ClassicResult {
    pub(crate) records_s: f64,
    /// Consumers that were assigned at least one partition.
    pub(crate) consumers_assigned: usize,
}

/// Counters the share consumers' tasks add to.
#[derive(Default)]
struct ShareProgress {
    accepted: AtomicU64,
    redelivered: AtomicU64,
    done: AtomicBool,
    served: Mutex<BTreeSet<usize>>,
    finished_at: Mutex<Option<Instant>>,
}

/// `spec.consumers` share consumers in a fresh share group, from the topic's start,
/// until the leaders confirm every record accepted.
pub(crate) fn run_share(spec: &ShareSpec) -> anyhow::Result<ShareResult> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run_share_async(spec))
}

async fn run_share_async(spec: &ShareSpec) -> anyhow::Result<ShareResult> {
    let group = super::fresh_topic("share-group");
    // A share group starts at the log end unless told otherwise; the topic is full.
    let mut admin = Client::connect_to(&spec.bootstrap).await?;
    admin
        .alter_group_configs(
            &group,
            &[ConfigOp::Set(
                "share.auto.offset.reset".into(),
                "earliest".into(),
            )],
        )
        .await?;
    let progress = Arc::new(ShareProgress::default());
    let start = Instant::now();
    let deadline = start + spec.timeout;
    let mut tasks = Vec::with_capacity(spec.consumers);
    for index in 0..spec.consumers {
        let config = ShareConsumerConfig {
            group: group.clone(),
            topics: vec![spec.topic.clone()],
            max_records: 500,
            max_bytes: 1 << 20,
            max_wait: Duration::from_millis(100),
        };
        let bootstrap = spec.bootstrap.clone();
        let progress = Arc::clone(&progress);
        let total = spec.records;
        tasks.push(tokio::spawn(async move {
            let outcome = share_member(&bootstrap, config, index, total, deadline, &progress).await;
            // One member failing ends the run: the others stop instead of waiting out
            // the deadline for records the failed member held.
            if outcome.is_err() {
                progress.done.store(true, Ordering::Relaxed);
            }
            outcome
        }));
    }
    let mut failure = None;
    for task in tasks {
        let outcome = task
            .await
            .map_err(|e| anyhow!("a share consumer panicked: {e}"));
        if let Err(e) = outcome.and_then(|r| r) {
            failure.get_or_insert(e);
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let finished_at = *lock(&progress.finished_at);
    let Some(end) = finished_at else {
        bail!(
            "the share group accepted {} of {} records in {:?}",
            progress.accepted.load(Ordering::Relaxed),
            spec.records,
            spec.timeout
        );
    };
    let seconds = end.duration_since(start).as_secs_f64();
    let consumers_served = lock(&progress.served).len();
    Ok(ShareResult {
        records_s: spec.records as f64 / seconds,
        redelivery_rate: progress.redelivered.load(Ordering::Relaxed) as f64 / spec.records as f64,
        consumers_served,
    })
}

/// One share consumer: joins, polls until the run is done, accepts what it still owes.
async fn share_member(
    bootstrap: &str,
    config: ShareConsumerConfig,
    index: usize,
    total: u64,
    deadline: Instant,
    progress: &ShareProgress,
) -> anyhow::Result<()> {
    let client = Client::connect_to(bootstrap).await?;
    let mut consumer = ShareConsumer::join(client, config).await?;
    while !progress.done.load(Ordering::Relaxed) && Instant::now() < deadline {
        let seen = consumer.poll().await?;
        if seen.acquired > 0 {
            lock(&progress.served).insert(index);
        }
        progress
            .redelivered
            .fetch_add(seen.redelivered, Ordering::Relaxed);
        let accepted = progress
            .accepted
            .fetch_add(seen.accepted, Ordering::Relaxed)
            + seen.accepted;
        if accepted >= total && !progress.done.swap(true, Ordering::Relaxed) {
            *lock(&progress.finished_at) = Some(Instant::now());
        }
    }
    // What this consumer still owes is accepted on the way out.
    let last = consumer.close().await?;
    progress.accepted.fetch_add(last, Ordering::Relaxed);
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The same number of librdkafka consumers in a fresh classic group (range assignor),
/// from the topic's start, until together they have read every record.
pub(crate) fn run_classic(spec: &ShareSpec) -> anyhow::Result<ClassicResult> {
    let group = super::fresh_topic("classic-group");
    let read = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut threads = Vec::with_capacity(spec.consumers);
    for index in 0..spec.consumers {
        let mut config = base_config(&spec.bootstrap);
        config
            .set("group.id", &group)
            .set("group.protocol", "classic")
            .set("client.id", format!("classic-{index}"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest");
        let consumer: BaseConsumer = config.create()?;
        consumer.subscribe(&[&spec.topic])?;
        let read = Arc::clone(&read);
        let stop = Arc::clone(&stop);
        threads.push(
            std::thread::Builder::new()
                .name(format!("classic-{index}"))
                .spawn(move || {
                    let mut assigned = false;
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(50)) {
                            read.fetch_add(1, Ordering::Relaxed);
                        }
                        // Read while consuming: the assignment can move before the end.
                        assigned |= consumer
                            .assignment()
                            .map(|a| a.count() > 0)
                            .unwrap_or(false);
                    }
                    assigned
                })?,
        );
    }
    let deadline = start + spec.timeout;
    while read.load(Ordering::Relaxed) < spec.records && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let seconds = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut consumers_assigned = 0;
    for thread in threads {
        match thread.join() {
            Ok(assigned) => consumers_assigned += usize::from(assigned),
            Err(_) => bail!("a classic consumer thread panicked"),
        }
    }
    let got = read.load(Ordering::Relaxed);
    if got < spec.records {
        bail!(
            "the classic group read {got} of {} records in {:?}",
            spec.records,
            spec.timeout
        );
    }
    Ok(ClassicResult {
        records_s: spec.records as f64 / seconds,
        consumers_assigned,
    })
}

/// `runs` of each group kind, interleaved (the machine is shared and noisy), over the
/// same filled topic: the medians, one row per kind and figure.
pub(crate) fn figures(spec: &ShareSpec, runs: usize) -> anyhow::Result<Vec<Figure>> {
    let runs = runs.max(1);
    let mut shares = Vec::with_capacity(runs);
    let mut classics = Vec::with_capacity(runs);
    for run_index in 0..runs {
        eprintln!(
            "share run {}/{runs}: {} consumers",
            run_index + 1,
            spec.consumers
        );
        shares.push(run_share(spec)?);
        eprintln!(
            "classic run {}/{runs}: {} consumers",
            run_index + 1,
            spec.consumers
        );
        classics.push(run_classic(spec)?);
    }
    let share_workload = format!("{} consumers, share group", spec.consumers);
    let classic_workload = format!("{} consumers, classic group", spec.consumers);
    let share_median =
        |f: fn(&ShareResult) -> f64| median(&shares.iter().map(f).collect::<Vec<_>>());
    let classic_median =
        |f: fn(&ClassicResult) -> f64| median(&classics.iter().map(f).collect::<Vec<_>>());
    let topic_note = format!("median of {runs}; {} records, all accepted", spec.records);
    Ok(vec![
        Figure::new(
            "share",
            &share_workload,
            share_median(|r| r.records_s),
            "records/s",
        )
        .note(format!(
            "{topic_note}; {:.0} consumers acquired records",
            share_median(|r| r.consumers_served as f64)
        )),
        Figure::new(
            "share",
            &share_workload,
            share_median(|r| r.redelivery_rate * 100.0),
            "% redelivered",
        )
        .note("records acquired with delivery count > 1, over the records"),
        Figure::new(
            "share",
            &classic_workload,
            classic_median(|r| r.records_s),
            "records/s",
        )
        .note(format!(
            "median of {runs}; {} records, all read; {:.0} consumers got partitions",
            spec.records,
            classic_median(|r| r.consumers_assigned as f64)
        )),
    ])
}
