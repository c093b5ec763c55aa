//! librdkafka's own view of a run, from its statistics callback: per window, the
//! request round trip to the broker (request written to response read), the time a
//! message waits in the partition queue before it is put in a request (`int_latency`),
//! the time a request waits in the output buffer before it is written (`outbuf_latency`),
//! and the requests sent. These split an end-to-end latency between client and broker.

use std::sync::{Arc, Mutex};

use std::sync::atomic::{AtomicU64, Ordering};

use rdkafka::consumer::ConsumerContext;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use rdkafka::ClientContext;
use serde::Serialize;

use crate::stats::median;

/// One statistics window of one broker connection, microseconds.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    rtt_p50: f64,
    rtt_p99: f64,
    queue_p50: f64,
    queue_p99: f64,
    outbuf_p50: f64,
    outbuf_p99: f64,
    /// Requests sent so far on the connection (cumulative).
    requests: u64,
    /// Seconds since the client started (librdkafka's `age`).
    age_s: f64,
}

/// Collects statistics windows for one client; clones share the windows (one goes to
/// the client, one stays with the caller).
#[derive(Clone, Default)]
pub(crate) struct StatsContext {
    windows: Arc<Mutex<Vec<Window>>>,
    /// Producers: delivery reports that carried an error.
    failed: Arc<AtomicU64>,
}

impl ClientContext for StatsContext {
    fn stats(&self, statistics: rdkafka::Statistics) {
        let age_s = statistics.age as f64 / 1e6;
        for broker in statistics.brokers.values().filter(|b| b.nodeid >= 0) {
            let Some(rtt) = &broker.rtt else { continue };
            if rtt.cnt == 0 {
                continue;
            }
            let p = |w: &Option<rdkafka::statistics::Window>, p99: bool| {
                w.as_ref()
                    .map_or(f64::NAN, |w| if p99 { w.p99 } else { w.p50 } as f64)
            };
            let window = Window {
                rtt_p50: rtt.p50 as f64,
                rtt_p99: rtt.p99 as f64,
                queue_p50: p(&broker.int_latency, false),
                queue_p99: p(&broker.int_latency, true),
                outbuf_p50: p(&broker.outbuf_latency, false),
                outbuf_p99: p(&broker.outbuf_latency, true),
                requests: broker.tx,
                age_s,
            };
            if let Ok(mut windows) = self.windows.lock() {
                windows.push(window);
            }
        }
    }
}

impl ConsumerContext for StatsContext {}

impl ProducerContext for StatsContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Medians over the windows of one client, µs; requests per second over the run.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ClientSplit {
    pub(crate) rtt_p50_us: f64,
    pub(crate) rtt_p99_us: f64,
    pub(crate) queue_p50_us: f64,
    pub(crate) queue_p99_us: f64,
    pub(crate) outbuf_p50_us: f64,
    pub(crate) outbuf_p99_us: f64,
    pub(crate) requests_per_s: f64,
}

impl StatsContext {
    /// Delivery reports with an error so far (producers).
    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Windows that ended after `skip_s` seconds of the client's life (the warm-up).
    pub(crate) fn split(&self, skip_s: f64) -> ClientSplit {
        let windows: Vec<Window> = self
            .windows
            .lock()
            .map(|w| w.iter().copied().filter(|w| w.age_s >= skip_s).collect())
            .unwrap_or_default();
        let m = |f: fn(&Window) -> f64| median(&windows.iter().map(f).collect::<Vec<_>>());
        let requests_per_s = match (windows.first(), windows.last()) {
            (Some(a), Some(b)) if b.age_s > a.age_s => {
                b.requests.saturating_sub(a.requests) as f64 / (b.age_s - a.age_s)
            }
            _ => f64::NAN,
        };
        ClientSplit {
            rtt_p50_us: m(|w| w.rtt_p50),
            rtt_p99_us: m(|w| w.rtt_p99),
            queue_p50_us: m(|w| w.queue_p50),
            queue_p99_us: m(|w| w.queue_p99),
            outbuf_p50_us: m(|w| w.outbuf_p50),
            outbuf_p99_us: m(|w| w.outbuf_p99),
            requests_per_s,
        }
    }
}

impl std::fmt::Display for ClientSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rtt p50 {:.0} / p99 {:.0} µs, queue p50 {:.0} / p99 {:.0} µs, outbuf p50 {:.0} / p99 {:.0} µs, {:.0} req/s",
            self.rtt_p50_us,
            self.rtt_p99_us,
            self.queue_p50_us,
            self.queue_p99_us,
            self.outbuf_p50_us,
            self.outbuf_p99_us,
            self.requests_per_s
        )
    }
}
