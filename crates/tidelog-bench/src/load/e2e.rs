//! End-to-end latency at a fixed rate: one producer paces records (the send time is in
//! the first 8 bytes of each record), one consumer in the same process reads them and
//! records now − send time. Samples from the warm-up are dropped.

use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use indicatif::ProgressBar;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset};
use serde::Serialize;

use super::client_stats::{ClientSplit, StatsContext};
use super::{base_config, consume::assigned_consumer_with, incompressible, progress};
use crate::stats::{Latencies, LatencySummary};

#[derive(Clone, Debug)]
pub(crate) struct E2eSpec {
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) partitions: i32,
    pub(crate) record_size: usize,
    pub(crate) rate: f64,
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
    pub(crate) acks: String,
    pub(crate) linger_ms: u32,
    /// librdkafka's `sticky.partitioning.linger.ms` (records without a key stay on one
    /// partition this long); `None` keeps librdkafka's default (twice `linger_ms`).
    pub(crate) sticky_ms: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct E2eResult {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    /// The rate actually achieved by the sender, records/s.
    pub(crate) achieved_rate: f64,
    pub(crate) latency: LatencySummary,
    /// librdkafka's statistics after the warm-up: the producer's Produce requests and
    /// the consumer's Fetch requests.
    pub(crate) producer: ClientSplit,
    pub(crate) consumer: ClientSplit,
}

const STATS_INTERVAL_MS: &str = "1000";

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn stamp() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn run(spec: &E2eSpec) -> anyhow::Result<E2eResult> {
    let _ = epoch();
    let warmup_s = spec.warmup.as_secs_f64();
    let record_size = spec.record_size.max(8);
    let consumer_stats = StatsContext::default();
    let producer_stats = StatsContext::default();
    let consumer = assigned_consumer_with(
        &spec.bootstrap,
        &spec.topic,
        spec.partitions,
        Offset::Beginning,
        true,
        consumer_stats.clone(),
    )?;
    // Let the consumer connect and start its long polls before the clock starts.
    let _ = consumer.poll(Duration::from_millis(500));
    let sender = {
        let spec = spec.clone();
        let stats = producer_stats.clone();
        thread::spawn(move || send_paced(&spec, record_size, stats))
    };
    let mut observer = Observer {
        warmup_until: stamp() + u64::try_from(spec.warmup.as_nanos()).unwrap_or(0),
        latencies: Latencies::new(),
        received: 0,
        bar: progress("e2e", None),
    };
    while !sender.is_finished() {
        observer.observe(consumer.poll(Duration::from_millis(20)))?;
    }
    let (sent_count, seconds) = sender
        .join()
        .map_err(|_| anyhow!("sender thread panicked"))??;
    // Records still travelling when the sender finished: bounded drain.
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while observer.received < sent_count && Instant::now() < drain_deadline {
        observer.observe(consumer.poll(Duration::from_millis(20)))?;
    }
    observer.bar.finish_and_clear();
    let Observer {
        latencies,
        received,
        ..
    } = observer;
    if received < sent_count {
        bail!("received {received} of {sent_count} records");
    }
    Ok(E2eResult {
        sent: sent_count,
        received,
        achieved_rate: sent_count as f64 / seconds.max(1e-9),
        latency: latencies.summary(),
        producer: producer_stats.split(warmup_s),
        consumer: consumer_stats.split(warmup_s + 0.5),
    })
}

struct Observer {
    warmup_until: u64,
    latencies: Latencies,
    received: u64,
    bar: ProgressBar,
}

impl Observer {
    fn observe(&mut self, message: Option<KafkaResult<BorrowedMessage<'_>>>) -> anyhow::Result<()> {
        let now = stamp();
        match message {
            Some(Ok(message)) => {
                let payload = message.payload().unwrap_or_default();
                let Some(bytes) = payload.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
                    bail!("record without a timestamp ({} bytes)", payload.len());
                };
                let sent_at = u64::from_le_bytes(bytes);
                self.received += 1;
                if sent_at >= self.warmup_until {
                    self.latencies
                        .record(Duration::from_nanos(now.saturating_sub(sent_at)));
                }
                if self.received % 1024 == 0 {
                    self.bar.set_position(self.received);
                }
                Ok(())
            }
            Some(Err(error)) => bail!("consume error: {error}"),
            None => Ok(()),
        }
    }
}

/// Sends at `spec.rate` for `spec.duration`; returns (records acknowledged, seconds).
fn send_paced(
    spec: &E2eSpec,
    record_size: usize,
    stats: StatsContext,
) -> anyhow::Result<(u64, f64)> {
    let mut config = base_config(&spec.bootstrap);
    config
        .set("acks", &spec.acks)
        .set("linger.ms", spec.linger_ms.to_string())
        .set("enable.idempotence", "false")
        // Every record's arrival is checked by the consumer; the sender only needs to
        // hear of failures, and serving a report per record would cost it the load
        // core (unserved reports also count against the producer's queue limit).
        .set("delivery.report.only.error", "true")
        .set("statistics.interval.ms", STATS_INTERVAL_MS);
    if let Some(ms) = spec.sticky_ms {
        config.set("sticky.partitioning.linger.ms", ms.to_string());
    }
    super::extra_settings(&mut config, "BENCH_PRODUCER_SET");
    let producer: BaseProducer<StatsContext> = config.create_with_context(stats)?;
    let mut payload = incompressible(record_size, 42);
    let interval = Duration::from_secs_f64(1.0 / spec.rate.max(1.0));
    let tick = Duration::from_micros(
        std::env::var("BENCH_E2E_TICK_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000),
    );
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < spec.duration {
        let due = start + interval.mul_f64(sent as f64);
        let now = Instant::now();
        // Records due within the next tick go now (each carries its real send time).
        // The wait is a plain sleep: `BaseProducer::poll(t)` hands librdkafka a timeout
        // in whole milliseconds and spins through the fraction that is left, which
        // took a quarter of the load core away from the client's own threads.
        if due > now + tick {
            producer.poll(Duration::ZERO);
            thread::sleep(due - now);
            continue;
        }
        payload[..8].copy_from_slice(&stamp().to_le_bytes());
        match producer.send(BaseRecord::<(), [u8]>::to(&spec.topic).payload(&payload)) {
            Ok(()) => sent += 1,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::ZERO);
                thread::sleep(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(error.into()),
        }
        if sent % 256 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    producer.flush(Duration::from_secs(60))?;
    let failed = producer.context().failed();
    if failed > 0 {
        bail!("{failed} of {sent} records were not acknowledged");
    }
    Ok((sent, seconds))
}
