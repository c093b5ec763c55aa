//! The client quota probe: throttled answers and the time clients were told to pause,
//! by quota type (produce, fetch, request), and the live quota sensors. Labelled by
//! type only: a label per user or client-id would grow with the clients.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    quota: &'static str,
}

pub(crate) struct QuotaProbe {
    throttled: Family<QuotaLabels, Counter>,
    throttle_seconds: Family<QuotaLabels, Counter<f64>>,
    sensors: Gauge,
}

impl QuotaProbe {
    pub(super) fn register(registry: &mut Registry) -> QuotaProbe {
        let probe = QuotaProbe {
            throttled: Family::default(),
            throttle_seconds: Family::default(),
            sensors: Gauge::default(),
        };
        registry.register(
            "quota_throttled_requests",
            "Answers throttled by a client quota (throttle_time_ms > 0 and the connection muted), by quota type: produce, fetch, request",
            probe.throttled.clone(),
        );
        registry.register(
            "quota_throttle_time_seconds",
            "Throttle time handed to clients by client quotas, by quota type",
            probe.throttle_seconds.clone(),
        );
        registry.register(
            "quota_sensors",
            "Live client quota sensors, one per (quota type, user, client-id) with traffic under a quota in the last hour",
            probe.sensors.clone(),
        );
        probe
    }

    pub(crate) fn throttled(&self, quota: &'static str, ms: u64) {
        let labels = QuotaLabels { quota };
        self.throttled.get_or_create(&labels).inc();
        self.throttle_seconds
            .get_or_create(&labels)
            .inc_by(ms as f64 / 1000.0);
    }

    pub(crate) fn set_sensors(&self, count: usize) {
        self.sensors.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}
