//! The network probe: connections, bytes on the wire, and per-API request counts,
//! errors, sizes and latencies (total, and split into the phases a slow request can
//! spend its time in).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::labels::{api_name, error_name};
use crate::poison::RwLockTolerant;

/// The error label of a request the node could not answer at all (undecodable body,
/// unsupported version): its connection was closed instead.
pub(crate) const CONNECTION_CLOSED: &str = "connection_closed";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    api: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    api: String,
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuthenticationLabels {
    listener: String,
    mechanism: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    api: String,
    error: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// 100 µs to ~52 s: a produce is sub-millisecond, a parked fetch waits up to max.wait.ms.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 2.0, 20))
}

/// 64 B to 16 MiB in steps of four.
fn size_histogram() -> Histogram {
    Histogram::new(exponential_buckets(64.0, 4.0, 10))
}

/// Handles for one API, made once so the hot path builds no label strings.
struct ApiHandles {
    requests: Counter,
    size: Histogram,
    total: Histogram,
    queue: Histogram,
    process: Histogram,
    send: Histogram,
}

/// When one request reached each stage, for the latency split.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestTiming {
    pub(crate) api: ApiKey,
    /// The whole frame had been read.
    pub(crate) received: Instant,
    /// The handler returned its reply (possibly a future still to run).
    pub(crate) dispatched: Instant,
}

pub(crate) struct RequestProbe {
    requests: Family<ApiLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    sizes: HistogramFamily<ApiLabels>,
    latency: HistogramFamily<ApiLabels>,
    phases: HistogramFamily<PhaseLabels>,
    /// Made on an API's first request, so idle APIs add no series.
    per_api: RwLock<HashMap<i16, Arc<ApiHandles>>>,
    connections_active: Gauge,
    connections_accepted: Counter,
    connections_refused: Counter,
    authentications: Family<AuthenticationLabels, Counter>,
    bytes_received: Counter,
    bytes_sent: Counter,
}

impl RequestProbe {
    pub(super) fn register(registry: &mut Registry) -> RequestProbe {
        let probe = RequestProbe {
            requests: Family::default(),
            errors: Family::default(),
            sizes: Family::new_with_constructor(size_histogram),
            latency: Family::new_with_constructor(latency_histogram),
            phases: Family::new_with_constructor(latency_histogram),
            per_api: RwLock::new(HashMap::new()),
            connections_active: Gauge::default(),
            connections_accepted: Counter::default(),
            connections_refused: Counter::default(),
            authentications: Family::default(),
            bytes_received: Counter::default(),
            bytes_sent: Counter::default(),
        };
        registry.register(
            "requests",
            "Kafka requests received, by API",
            probe.requests.clone(),
        );
        registry.register(
            "request_errors",
            "Error codes answered, by API and Kafka error name (per partition where the API answers per partition); connection_closed when the request could not be answered at all",
            probe.errors.clone(),
        );
        registry.register(
            "request_size_bytes",
            "Size of request frames, by API",
            probe.sizes.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request's last byte read to its response's last byte written, by API",
            probe.latency.clone(),
        );
        registry.register(
            "request_phase_seconds",
            "Request time split by phase: process (handler, including long-poll and acks waits), queue (ready, waiting behind earlier responses of its connection), send (writing the response)",
            probe.phases.clone(),
        );
        registry.register(
            "authentication",
            "SASL authentications and re-authentications, by listener, mechanism (none when the client failed before choosing one) and result (success, failure)",
            probe.authentications.clone(),
        );
        registry.register(
            "connections_active",
            "Open Kafka-protocol connections",
            probe.connections_active.clone(),
        );
        registry.register(
            "connections_accepted",
            "Kafka-protocol connections accepted",
            probe.connections_accepted.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections refused because max.connections was reached",
            probe.connections_refused.clone(),
        );
        registry.register(
            "network_received_bytes",
            "Bytes of request frames read, size prefixes included",
            probe.bytes_received.clone(),
        );
        registry.register(
            "network_sent_bytes",
            "Bytes of response frames written, size prefixes included",
            probe.bytes_sent.clone(),
        );
        probe
    }

    fn handles_for(&self, key: ApiKey) -> ApiHandles {
        let api = ApiLabels { api: api_name(key) };
        let phase = |phase| PhaseLabels {
            api: api.api.clone(),
            phase,
        };
        ApiHandles {
            requests: self.requests.get_or_create_owned(&api),
            size: self.sizes.get_or_create_owned(&api),
            total: self.latency.get_or_create_owned(&api),
            queue: self.phases.get_or_create_owned(&phase("queue")),
            process: self.phases.get_or_create_owned(&phase("process")),
            send: self.phases.get_or_create_owned(&phase("send")),
        }
    }

    fn with_handles(&self, key: ApiKey, f: impl FnOnce(&ApiHandles)) {
        let known = self.per_api.read_locked().get(&(key as i16)).cloned();
        let handles = match known {
            Some(handles) => handles,
            None => {
                let mut map = self.per_api.write_locked();
                // Bounded: ApiKey has a fixed set of values.
                Arc::clone(
                    map.entry(key as i16)
                        .or_insert_with(|| Arc::new(self.handles_for(key))),
                )
            }
        };
        f(&handles);
    }

    pub(crate) fn connection_opened(&self) {
        self.connections_accepted.inc();
        self.connections_active.inc();
    }

    pub(crate) fn connection_closed(&self) {
        self.connections_active.dec();
    }

    pub(crate) fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// A SASL exchange ended with `result` (`success` or `failure`).
    pub(crate) fn authentication(&self, listener: &str, mechanism: &str, result: &'static str) {
        self.authentications
            .get_or_create(&AuthenticationLabels {
                listener: listener.to_string(),
                mechanism: mechanism.to_string(),
                result,
            })
            .inc();
    }

    /// A frame of `len` body bytes was read (its 4-byte size prefix comes on top).
    pub(crate) fn frame_received(&self, len: usize) {
        self.bytes_received.inc_by(len as u64 + 4);
    }

    /// A request whose header decoded as `key`, `frame_len` bytes long.
    pub(crate) fn request(&self, key: ApiKey, frame_len: usize) {
        self.with_handles(key, |h| {
            h.requests.inc();
            h.size.observe(frame_len as f64 + 4.0);
        });
    }

    /// A request of an API or version this node does not implement, refused before
    /// its body was read: answered UNSUPPORTED_VERSION (ApiVersions) or closed.
    pub(crate) fn unsupported_version(&self, key: ApiKey) {
        self.with_handles(key, |h| {
            h.requests.inc();
        });
        self.error(key, error_name(35));
    }

    /// A Kafka error code in a response (codes 0, NONE, are not errors).
    pub(crate) fn error_code(&self, key: ApiKey, code: i16) {
        if code != 0 {
            self.error(key, error_name(code));
        }
    }

    /// The request could not be answered; its connection was closed.
    pub(crate) fn closed_connection(&self, key: ApiKey) {
        self.error(key, CONNECTION_CLOSED.to_string());
    }

    fn error(&self, key: ApiKey, error: String) {
        let labels = ErrorLabels {
            api: api_name(key),
            error,
        };
        self.errors.get_or_create(&labels).inc();
    }

    pub(crate) fn bytes_sent(&self, bytes: u64) {
        self.bytes_sent.inc_by(bytes);
    }

    /// Records the latency split once the response is written (or skipped, acks=0):
    /// `dequeued` when the writer took the reply, `ready` when its future resolved.
    pub(crate) fn finished(&self, t: RequestTiming, dequeued: Instant, ready: Instant) {
        let done = Instant::now();
        let secs = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64();
        // The writer resolves a reply's future only when it reaches it, so time spent
        // in the future after being dequeued is processing, not queueing.
        let process = secs(t.received, t.dispatched) + secs(dequeued, ready);
        self.with_handles(t.api, |h| {
            h.total.observe(secs(t.received, done));
            h.process.observe(process);
            h.queue.observe(secs(t.dispatched, dequeued));
            h.send.observe(secs(ready, done));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn counts_requests_errors_and_bytes_per_api() {
        let mut registry = Registry::with_prefix("tidelog");
        let probe = RequestProbe::register(&mut registry);
        probe.frame_received(96);
        probe.request(ApiKey::Produce, 96);
        probe.request(ApiKey::Produce, 96);
        probe.error_code(ApiKey::Produce, 0);
        probe.error_code(ApiKey::Produce, 3);
        probe.closed_connection(ApiKey::Fetch);
        probe.unsupported_version(ApiKey::Fetch);
        probe.connection_opened();
        probe.connection_opened();
        probe.connection_closed();
        let text = render(&registry);
        assert!(
            text.contains("tidelog_requests_total{api=\"Produce\"} 2\n"),
            "{text}"
        );
        assert!(
            !text.contains("api=\"Metadata\""),
            "idle APIs have no series"
        );
        assert!(text.contains(
            "tidelog_request_errors_total{api=\"Produce\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"} 1\n"
        ));
        assert!(text.contains(
            "tidelog_request_errors_total{api=\"Fetch\",error=\"connection_closed\"} 1\n"
        ));
        assert!(text.contains(
            "tidelog_request_errors_total{api=\"Fetch\",error=\"UNSUPPORTED_VERSION\"} 1\n"
        ));
        assert!(text.contains("tidelog_requests_total{api=\"Fetch\"} 1\n"));
        assert!(!text.contains("error=\"NONE\""));
        assert!(text.contains("tidelog_network_received_bytes_total 100\n"));
        assert!(text.contains("tidelog_request_size_bytes_count{api=\"Produce\"} 2\n"));
        assert!(text.contains("tidelog_request_size_bytes_sum{api=\"Produce\"} 200.0\n"));
        assert!(text.contains("tidelog_connections_active 1\n"));
        assert!(text.contains("tidelog_connections_accepted_total 2\n"));
    }

    /// The value of one series in rendered text.
    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{series} missing in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn latency_phases_add_up_to_the_total() {
        let mut registry = Registry::with_prefix("tidelog");
        let probe = RequestProbe::register(&mut registry);
        let received = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let timing = RequestTiming {
            api: ApiKey::Metadata,
            received,
            dispatched: Instant::now(),
        };
        let dequeued = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        probe.finished(timing, dequeued, Instant::now());
        let text = render(&registry);
        let api = "{api=\"Metadata\"}";
        assert_eq!(
            value(
                &text,
                &format!("tidelog_request_duration_seconds_count{api}")
            ),
            1.0
        );
        let total = value(&text, &format!("tidelog_request_duration_seconds_sum{api}"));
        let phase = |p: &str| {
            value(
                &text,
                &format!("tidelog_request_phase_seconds_sum{{api=\"Metadata\",phase=\"{p}\"}}"),
            )
        };
        assert!(phase("process") >= 0.004, "{text}");
        let parts = phase("process") + phase("queue") + phase("send");
        assert!((parts - total).abs() < 1e-6, "{parts} != {total}");
    }
}
