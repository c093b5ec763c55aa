//! Client quotas enforced as Kafka's `ClientQuotaManager` (produce and fetch byte
//! rates) and `ClientRequestQuotaManager` (request percentage) enforce them.
//!
//! The quota of a request is found in the metadata image (quota records written by
//! AlterClientQuotas) in Kafka's order for its user and client-id (`resolve`). The
//! value the request adds is recorded in the sensor of the entity that quota belongs
//! to, so a user quota is shared by every client-id of that user, and a default quota
//! gives each user (or client-id) a sensor of its own. When the measured rate is above
//! the quota, the answer carries `throttle_time_ms` (Kafka's
//! `(rate - quota) / quota × window`) and the connection reads nothing more from the
//! client for that long (KIP-219: the client pauses on its own, the broker's muting
//! holds one that does not).
//!
//! Sensors live only for (user, client-id) pairs with a quota, are forgotten after an
//! hour without traffic (Kafka's inactive-sensor expiry) and are capped in number.

mod rate;
mod resolve;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tidelog_controller::quota::{CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};
use tidelog_controller::MetadataImage;

use crate::config::BrokerConfig;
use crate::poison::LockTolerant;
use crate::settings;
use rate::{throttle_ms, SampledRate, Window};
use resolve::resolve;

/// Kafka expires a client's quota sensors after an hour without a request.
const INACTIVE_EXPIRY_MS: u64 = 3_600_000;
/// How often the expired sensors are looked for.
const SWEEP_EVERY_MS: u64 = 60_000;
/// Most sensors kept at once; past it the least recently used goes.
const MAX_SENSORS: usize = 100_000;

/// The three client quotas Kafka enforces on a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum QuotaKind {
    Produce,
    Fetch,
    Request,
}

impl QuotaKind {
    /// The quota key (AlterClientQuotas) that bounds this kind.
    pub(crate) fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }

    /// Kafka's quota type names, the metrics label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            QuotaKind::Produce => "produce",
            QuotaKind::Fetch => "fetch",
            QuotaKind::Request => "request",
        }
    }
}

/// What a recording decided: how long to throttle, and which sensor took it (to take
/// it back from).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recorded {
    pub(crate) throttle_ms: u64,
    sensor: Option<SensorKey>,
    value: f64,
}

impl Recorded {
    pub(crate) const NONE: Recorded = Recorded {
        throttle_ms: 0,
        sensor: None,
        value: 0.0,
    };

    /// The throttle as the wire's `throttle_time_ms`.
    pub(crate) fn throttle_time_ms(&self) -> i32 {
        i32::try_from(self.throttle_ms).unwrap_or(i32::MAX)
    }
}

type SensorKey = (QuotaKind, String, String);

struct Sensors {
    map: HashMap<SensorKey, SampledRate>,
    last_sweep_ms: u64,
}

pub(crate) struct QuotaManager {
    window: Window,
    /// Byte-rate throttles are capped at the whole measured span; request-percentage
    /// ones at one window, as Kafka's ClientRequestQuotaManager caps them.
    max_byte_throttle_ms: u64,
    sensors: Mutex<Sensors>,
    started: Instant,
}

impl QuotaManager {
    pub(crate) fn new(config: &BrokerConfig) -> QuotaManager {
        let samples = u32::try_from(config.get(settings::QUOTA_WINDOW_NUM).max(1)).unwrap_or(11);
        let seconds =
            u64::try_from(config.get(settings::QUOTA_WINDOW_SIZE_SECONDS).max(1)).unwrap_or(1);
        QuotaManager::with_window(Window {
            samples,
            window_ms: seconds.saturating_mul(1000),
        })
    }

    fn with_window(window: Window) -> QuotaManager {
        QuotaManager {
            window,
            max_byte_throttle_ms: window.span_ms(),
            sensors: Mutex::new(Sensors {
                map: HashMap::new(),
                last_sweep_ms: 0,
            }),
            started: Instant::now(),
        }
    }

    /// Milliseconds on a monotonic clock (wall-clock jumps must not throttle).
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Records `value` (bytes, or percent-seconds of handling time) for the quota of
    /// `kind` that applies to `(user, client_id)`; nothing when none applies.
    pub(crate) fn record(
        &self,
        image: &MetadataImage,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: u64,
    ) -> Recorded {
        if image.client_quotas().is_empty() {
            return Recorded::NONE;
        }
        let Some(resolved) = resolve(image, kind.key(), user, client_id) else {
            return Recorded::NONE;
        };
        let key = (kind, resolved.user_tag, resolved.client_tag);
        let mut sensors = self.sensors.locked();
        self.sweep(&mut sensors, now_ms);
        if !sensors.map.contains_key(&key) && sensors.map.len() >= MAX_SENSORS {
            evict_least_recent(&mut sensors.map);
        }
        let rate = sensors
            .map
            .entry(key.clone())
            .or_insert_with(SampledRate::new);
        rate.record(self.window, value, now_ms);
        let measured = rate.rate(self.window, now_ms);
        let size = rate.window_size_ms(self.window, now_ms);
        let cap = match kind {
            QuotaKind::Request => self.window.window_ms,
            QuotaKind::Produce | QuotaKind::Fetch => self.max_byte_throttle_ms,
        };
        Recorded {
            throttle_ms: throttle_ms(measured, resolved.bound, size).min(cap),
            sensor: Some(key),
            value,
        }
    }

    /// Takes back what `recorded` added (a throttled fetch is answered empty).
    pub(crate) fn unrecord(&self, recorded: &Recorded) {
        let Some(key) = &recorded.sensor else { return };
        let mut sensors = self.sensors.locked();
        if let Some(rate) = sensors.map.get_mut(key) {
            rate.unrecord(recorded.value);
        }
    }

    /// Kafka's `getMaxValueInQuotaWindow`: the most a fetch may return under the
    /// consumer quota of `(user, client_id)`, so one answer cannot take many windows'
    /// worth of quota at once.
    pub(crate) fn max_fetch_bytes(
        &self,
        image: &MetadataImage,
        user: &str,
        client_id: &str,
    ) -> Option<usize> {
        if image.client_quotas().is_empty() {
            return None;
        }
        let resolved = resolve(image, CONSUMER_BYTE_RATE, user, client_id)?;
        let windows = f64::from(self.window.samples.saturating_sub(1).max(1));
        let seconds = self.window.window_ms as f64 / 1000.0;
        let bytes = resolved.bound * windows * seconds;
        Some(if bytes >= usize::MAX as f64 {
            usize::MAX
        } else {
            bytes.max(1.0) as usize
        })
    }

    /// How many sensors are live (a gauge on /metrics).
    pub(crate) fn sensor_count(&self) -> usize {
        self.sensors.locked().map.len()
    }

    fn sweep(&self, sensors: &mut Sensors, now_ms: u64) {
        if now_ms.saturating_sub(sensors.last_sweep_ms) < SWEEP_EVERY_MS {
            return;
        }
        sensors.last_sweep_ms = now_ms;
        sensors.map.retain(|_, rate| {
            rate.last_ms()
                .is_some_and(|last| now_ms.saturating_sub(last) < INACTIVE_EXPIRY_MS)
        });
    }
}

fn evict_least_recent(map: &mut HashMap<SensorKey, SampledRate>) {
    let oldest = map
        .iter()
        .min_by_key(|(_, rate)| rate.last_ms().unwrap_or(0))
        .map(|(k, _)| k.clone());
    if let Some(key) = oldest {
        map.remove(&key);
    }
}

/// Kafka's quota user of a principal: its name (`User:alice` → `alice`).
pub(crate) fn quota_user(principal: &str) -> &str {
    principal.strip_prefix("User:").unwrap_or(principal)
}

/// A request's handling time as Kafka's request quota counts it: percent of one
/// second.
pub(crate) fn percent_seconds(handled: Duration) -> f64 {
    handled.as_secs_f64() * 100.0
}

/// When a connection may be read again: set by a throttled answer, honoured by the
/// connection's reader before it reads or dispatches the next request.
#[derive(Debug, Default)]
pub(crate) struct Mute {
    until: Mutex<Option<Instant>>,
}

impl Mute {
    /// Mutes for `ms` from now (a longer mute already set stays).
    pub(crate) fn extend(&self, ms: u64) {
        if ms == 0 {
            return;
        }
        let until = Instant::now() + Duration::from_millis(ms);
        let mut slot = self.until.locked();
        if slot.is_none_or(|current| current < until) {
            *slot = Some(until);
        }
    }

    /// The end of the mute in force, clearing it.
    pub(crate) fn take(&self) -> Option<Instant> {
        let mut slot = self.until.locked();
        slot.take().filter(|until| *until > Instant::now())
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

/// Records `value` against the quota of `kind` for the connection's principal and
/// `client_id`, counts a throttle in the metrics and mutes the connection for it.
/// Connections of followers are exempt.
pub(crate) fn charge(
    ctx: &crate::context::BrokerContext,
    session: &crate::net::Session,
    kind: QuotaKind,
    client_id: Option<&str>,
    value: f64,
) -> Recorded {
    if session
        .inter_broker
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Recorded::NONE;
    }
    let image = ctx.metadata.image();
    if image.client_quotas().is_empty() {
        return Recorded::NONE;
    }
    let quotas = &ctx.quotas;
    let user = quota_user(&session.principal);
    let recorded = quotas.record(
        &image,
        kind,
        user,
        client_id.unwrap_or(""),
        value,
        quotas.now_ms(),
    );
    ctx.metrics.quotas.set_sensors(quotas.sensor_count());
    if recorded.throttle_ms > 0 {
        ctx.metrics
            .quotas
            .throttled(kind.label(), recorded.throttle_ms);
        session.mute.extend(recorded.throttle_ms);
    }
    recorded
}
