//! The clock, behind a seam: every time-dependent decision of the coordinators reads
//! it through [`Clock`], so tests (and a seeded simulation) can drive time themselves.

#[cfg(test)]
use std::sync::atomic::{AtomicI64, Ordering};
#[cfg(test)]
use std::time::Duration;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Monotonic time for timeouts, wall-clock time for Kafka's timestamps.
pub(crate) trait Clock: Send + Sync + 'static {
    fn now(&self) -> Instant;
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The machine's clocks.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to: both readings advance together.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ManualClock {
    start: Instant,
    start_ms: i64,
    elapsed_ms: AtomicI64,
}

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new(start_ms: i64) -> ManualClock {
        ManualClock {
            start: Instant::now(),
            start_ms,
            elapsed_ms: AtomicI64::new(0),
        }
    }

    pub(crate) fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.elapsed_ms.fetch_add(ms, Ordering::AcqRel);
    }
}

#[cfg(test)]
impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let elapsed = u64::try_from(self.elapsed_ms.load(Ordering::Acquire)).unwrap_or(0);
        self.start + Duration::from_millis(elapsed)
    }

    fn now_ms(&self) -> i64 {
        self.start_ms
            .saturating_add(self.elapsed_ms.load(Ordering::Acquire))
    }
}
