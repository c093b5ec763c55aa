//! The produce workload: N librdkafka producers, each on its own thread and connection,
//! sending fixed-size records as fast as the client queue allows (or one at a time,
//! waiting for each acknowledgement, for request-latency and group-commit figures).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::ClientContext;
use serde::Serialize;

use super::{base_config, incompressible, progress};
use crate::stats::{mb_per_s, Latencies, LatencySummary};

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
}

#[derive(Default)]
struct Counters {
    acked: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

struct CountingContext {
    counters: Arc<Counters>,
}

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, _: ()) {
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
        bar.set_position(counters.acked.load(Ordering::Relaxed));
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
    Ok(ProduceResult {
        records,
        bytes,
        seconds: elapsed.as_secs_f64(),
        mb_s: mb_per_s(bytes, elapsed),
        records_s: records as f64 / elapsed.as_secs_f64().max(1e-9),
        latency: spec.one_in_flight.then(|| latencies.summary()),
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
        config.set("max.in.flight.requests.per.connection", "1");
    }
    let context = CountingContext {
        counters: Arc::clone(&counters),
    };
    let created = config.create_with_context::<_, BaseProducer<CountingContext>>(context);
    // Every thread must reach the barrier, or the others wait forever.
    barrier.wait();
    let producer = created?;
    let payload = incompressible(spec.record_size, index as u64 + 1);
    let deadline = spec.duration.map(|d| Instant::now() + d);
    let mut latencies = Latencies::new();
    let mut key = String::new();
    for sequence in 0..count {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if spec.keyed {
            key.clear();
            key.push_str(&format!("key-{index}-{}", sequence % 10_000));
        }
        let sent_at = Instant::now();
        send(
            &producer,
            &spec.topic,
            &payload,
            spec.keyed.then_some(key.as_str()),
        )?;
        if spec.one_in_flight {
            wait_for_delivery(&producer)?;
            latencies.record(sent_at.elapsed());
        } else if sequence % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
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

/// In one-in-flight mode: serve callbacks until this producer has nothing queued,
/// in flight or unreported, i.e. its one record was acknowledged (or failed).
fn wait_for_delivery(producer: &BaseProducer<CountingContext>) -> anyhow::Result<()> {
    let started = Instant::now();
    while producer.in_flight_count() > 0 {
        producer.poll(Duration::from_millis(1));
        if started.elapsed() > Duration::from_secs(60) {
            bail!("no acknowledgement within 60 s");
        }
    }
    Ok(())
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
        .create_with_context::<_, BaseProducer<CountingContext>>(CountingContext {
            counters: Arc::clone(&counters),
        })?;
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
    producer.flush(Duration::from_secs(120))?;
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
