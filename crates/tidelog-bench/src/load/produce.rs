//! The produce workload: N librdkafka producers, each on its own thread and connection,
//! sending fixed-size records as fast as the client queue allows (or one at a time,
//! waiting for each acknowledgement, for request-latency and group-commit figures).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use serde::Serialize;

use super::{base_config, incompressible, progress};
use crate::stats::{mb_per_s, median, Latencies, LatencySummary};

/// What to send.
#[derive(Clone, Debug)]
pub(crate) struct ProduceSpec {
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) record_size: usize,
    /// Records in total, split evenly across producers.
    pub(crate) count: u64,
    /// Stop sending after this long even if `count` is not reached.
    pub(crate) duration: Option<Duration>,
    pub(crate) acks: String,
    pub(crate) linger_ms: u32,
    pub(crate) batch_size: usize,
    pub(crate) compression: String,
    pub(crate) keyed: bool,
    pub(crate) producers: usize,
    /// Wait for each record's acknowledgement before sending the next.
    pub(crate) one_in_flight: bool,
}

/// What happened.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ProduceResult {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    pub(crate) mb_s: f64,
    pub(crate) records_s: f64,
    /// Per-record acknowledgement latency, only in one-in-flight mode.
    pub(crate) latency: Option<LatencySummary>,
    /// librdkafka's request round trip to the broker (median over its statistics
    /// windows of the window p50 and p99), µs; only in one-in-flight mode.
    pub(crate) client_rtt_p50_us: Option<f64>,
    pub(crate) client_rtt_p99_us: Option<f64>,
    /// librdkafka's internal queue latency p99 (median over windows), µs.
    pub(crate) client_queue_p99_us: Option<f64>,
}

#[derive(Default)]
struct Counters {
    acked: AtomicU64,
    /// Records handed to librdkafka (progress while reports come only for failures).
    enqueued: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// librdkafka's own view, one entry per statistics window with traffic:
    /// (socket round trip p50, p99, internal queue p99), microseconds.
    windows: Mutex<Vec<(f64, f64, f64)>>,
}

struct CountingContext {
    counters: Arc<Counters>,
    /// Delivery reports this producer has had, with a condvar to wait on (one in flight).
    settled: Arc<(Mutex<u64>, Condvar)>,
}

impl CountingContext {
    fn new(counters: Arc<Counters>) -> Self {
        Self {
            counters,
            settled: Arc::new((Mutex::new(0), Condvar::new())),
        }
    }

    fn settle(&self) {
        let (count, changed) = &*self.settled;
        if let Ok(mut count) = count.lock() {
            *count += 1;
            changed.notify_all();
        }
    }
}

impl ClientContext for CountingContext {
    /// Keeps librdkafka's per-broker request round trip (request written to response
    /// read) and internal queue latency, which split a produce's latency between the
    /// client and the broker plus network.
    fn stats(&self, statistics: rdkafka::Statistics) {
        for broker in statistics.brokers.values().filter(|b| b.nodeid >= 0) {
            let (Some(rtt), queue) = (&broker.rtt, &broker.int_latency) else {
                continue;
            };
            if rtt.cnt > 0 {
                let queue_p99 = queue.as_ref().map_or(f64::NAN, |q| q.p99 as f64);
                if let Ok(mut windows) = self.counters.windows.lock() {
                    windows.push((rtt.p50 as f64, rtt.p99 as f64, queue_p99));
                }
            }
        }
    }
}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        self.settle();
        match result {
            Ok(_) => {
                self.counters.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.counters.first_error.lock() {
                    first.get_or_insert_with(|| error.to_string());
                }
            }
        }
    }
}

/// Runs the workload; fails if any record was not acknowledged.
pub(crate) fn run(spec: &ProduceSpec) -> anyhow::Result<ProduceResult> {
    let producers = spec.producers.max(1);
    let counters = Arc::new(Counters::default());
    let barrier = Arc::new(Barrier::new(producers + 1));
    let bar = progress("produce", Some(spec.count));
    let mut workers = Vec::with_capacity(producers);
    for index in 0..producers {
        let share = spec.count / producers as u64
            + u64::from((index as u64) < spec.count % producers as u64);
        let spec = spec.clone();
        let counters = Arc::clone(&counters);
        let barrier = Arc::clone(&barrier);
        workers.push(thread::spawn(move || {
            producer_thread(&spec, index, share, counters, &barrier)
        }));
    }
    barrier.wait();
    let start = Instant::now();
    while !workers.iter().all(|w| w.is_finished()) {
        let acked = counters.acked.load(Ordering::Relaxed);
        bar.set_position(acked.max(counters.enqueued.load(Ordering::Relaxed)));
        thread::sleep(Duration::from_millis(50));
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let mut latencies = Latencies::new();
    for worker in workers {
        let own = worker
            .join()
            .map_err(|_| anyhow!("producer thread panicked"))??;
        latencies.merge(&own);
    }
    let failed = counters.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = counters.first_error.lock().ok().and_then(|e| e.clone());
        bail!(
            "{failed} records failed; first error: {}",
            first.unwrap_or_default()
        );
    }
    let records = counters.acked.load(Ordering::Relaxed);
    let bytes = records * spec.record_size as u64;
    let windows = counters
        .windows
        .lock()
        .map(|w| w.clone())
        .unwrap_or_default();
    let window_median = |pick: fn(&(f64, f64, f64)) -> f64| {
        (!windows.is_empty()).then(|| median(&windows.iter().map(pick).collect::<Vec<_>>()))
    };
    Ok(ProduceResult {
        records,
        bytes,
        seconds: elapsed.as_secs_f64(),
        mb_s: mb_per_s(bytes, elapsed),
        records_s: records as f64 / elapsed.as_secs_f64().max(1e-9),
        latency: spec.one_in_flight.then(|| latencies.summary()),
        client_rtt_p50_us: window_median(|w| w.0),
        client_rtt_p99_us: window_median(|w| w.1),
        client_queue_p99_us: window_median(|w| w.2),
    })
}

fn producer_thread(
    spec: &ProduceSpec,
    index: usize,
    count: u64,
    counters: Arc<Counters>,
    barrier: &Barrier,
) -> anyhow::Result<Latencies> {
    let mut config = base_config(&spec.bootstrap);
    config
        .set("acks", &spec.acks)
        .set("linger.ms", spec.linger_ms.to_string())
        .set("batch.size", spec.batch_size.to_string())
        .set("compression.codec", &spec.compression)
        .set("queue.buffering.max.kbytes", "1048576")
        .set("queue.buffering.max.messages", "1000000")
        .set(
            "message.max.bytes",
            (spec.batch_size.max(1 << 20) + 1024).to_string(),
        )
        .set("enable.idempotence", "false");
    if spec.one_in_flight {
        config
            .set("max.in.flight.requests.per.connection", "1")
            // Short runs (T4's 3,000 pings last under half a second) still see windows.
            .set("statistics.interval.ms", "100");
    }
    if spec.one_in_flight {
        return one_in_flight(spec, &config, index, count, counters, barrier);
    }
    // Reports only for failures: a report per record cost the load core (one
    // callback per record on this thread); every record still counts only once the
    // flush below has seen it acknowledged, and any failure still fails the run.
    config.set("delivery.report.only.error", "true");
    let context = CountingContext::new(Arc::clone(&counters));
    let created = config.create_with_context::<_, BaseProducer<CountingContext>>(context);
    // Every thread must reach the barrier, or the others wait forever.
    barrier.wait();
    let producer = created?;
    let payload = incompressible(spec.record_size, index as u64 + 1);
    let deadline = spec.duration.map(|d| Instant::now() + d);
    let mut key = String::new();
    let (mut enqueued, mut reported) = (0u64, 0u64);
    for sequence in 0..count {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if spec.keyed {
            key.clear();
            key.push_str(&format!("key-{index}-{}", sequence % 10_000));
        }
        send(
            &producer,
            &spec.topic,
            &payload,
            spec.keyed.then_some(key.as_str()),
        )?;
        enqueued += 1;
        if sequence % 1024 == 0 {
            producer.poll(Duration::ZERO);
            counters
                .enqueued
                .fetch_add(enqueued - reported, Ordering::Relaxed);
            reported = enqueued;
        }
    }
    producer.flush(Duration::from_secs(120))?;
    // flush() returned: every enqueued record was answered; failures were reported.
    counters.acked.fetch_add(enqueued, Ordering::Relaxed);
    Ok(Latencies::new())
}

/// One record at a time: send, then sleep on the delivery condvar. A `ThreadedProducer`
/// serves callbacks on its own thread the moment they arrive; `BaseProducer::poll`
/// instead blocks for its whole timeout even after serving one, which would add up to
/// that timeout to every measured latency.
fn one_in_flight(
    spec: &ProduceSpec,
    config: &rdkafka::ClientConfig,
    index: usize,
    count: u64,
    counters: Arc<Counters>,
    barrier: &Barrier,
) -> anyhow::Result<Latencies> {
    let context = CountingContext::new(counters);
    let settled = Arc::clone(&context.settled);
    let created = config.create_with_context::<_, ThreadedProducer<CountingContext>>(context);
    barrier.wait();
    let producer = created?;
    let payload = incompressible(spec.record_size, index as u64 + 1);
    let deadline = spec.duration.map(|d| Instant::now() + d);
    let mut latencies = Latencies::new();
    for sequence in 0..count {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let key = format!("key-{index}-{}", sequence % 10_000);
        let mut record = BaseRecord::to(&spec.topic).payload(&payload[..]);
        if spec.keyed {
            record = record.key(key.as_str());
        }
        let sent_at = Instant::now();
        producer.send(record).map_err(|(error, _)| error)?;
        let (count_lock, changed) = &*settled;
        let mut settled_count = count_lock
            .lock()
            .map_err(|_| anyhow!("delivery lock poisoned"))?;
        while *settled_count <= sequence {
            let (guard, timeout) = changed
                .wait_timeout(settled_count, Duration::from_secs(60))
                .map_err(|_| anyhow!("delivery lock poisoned"))?;
            settled_count = guard;
            if timeout.timed_out() && *settled_count <= sequence {
                bail!("no acknowledgement within 60 s");
            }
        }
        drop(settled_count);
        latencies.record(sent_at.elapsed());
    }
    producer.flush(Duration::from_secs(120))?;
    Ok(latencies)
}

/// Enqueues one record, serving delivery callbacks while the client queue is full.
fn send(
    producer: &BaseProducer<CountingContext>,
    topic: &str,
    payload: &[u8],
    key: Option<&str>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let mut record = BaseRecord::to(topic).payload(payload);
        if let Some(key) = key {
            record = record.key(key);
        }
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                if started.elapsed() > Duration::from_secs(120) {
                    bail!("client queue full for 120 s: the broker stopped acknowledging");
                }
                producer.poll(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(error.into()),
        }
    }
}

/// Sends one small record to every partition of `topic` and waits for all of them to be
/// acknowledged; returns how many were. Makes idle partitions real (files open) and
/// proves each one accepts writes.
pub(crate) fn touch_partitions(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<u64> {
    let counters = Arc::new(Counters::default());
    let producer = base_config(bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("enable.idempotence", "false")
        .set("queue.buffering.max.messages", "1000000")
        .create_with_context::<_, BaseProducer<CountingContext>>(CountingContext::new(
            Arc::clone(&counters),
        ))?;
    let payload = incompressible(100, 7);
    for partition in 0..partitions {
        let started = Instant::now();
        loop {
            let record = BaseRecord::<(), [u8]>::to(topic)
                .payload(&payload)
                .partition(partition);
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                    if started.elapsed() < Duration::from_secs(60) =>
                {
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => return Err(error.into()),
            }
        }
    }
    // Two minutes, plus a few milliseconds per partition for T11's largest topics.
    let per_partition = Duration::from_millis(5) * u32::try_from(partitions).unwrap_or(0);
    producer.flush(Duration::from_secs(120) + per_partition)?;
    let failed = counters.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = counters.first_error.lock().ok().and_then(|e| e.clone());
        bail!(
            "{failed} partitions refused a record; first error: {}",
            first.unwrap_or_default()
        );
    }
    Ok(counters.acked.load(Ordering::Relaxed))
}
