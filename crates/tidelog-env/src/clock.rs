//! The clock seam: time-dependent decisions (session and transaction timeouts, group
//! expiry) read it through [`Clock`], so a test can drive time itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Monotonic time for timeouts, wall-clock time for Kafka's timestamps.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Instant;
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The machine's clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

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

/// A clock that moves only when told to; both readings advance together.
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    start_ms: i64,
    elapsed_ms: AtomicI64,
}

impl ManualClock {
    /// Starts at `start_ms` milliseconds since the epoch (and at the current instant).
    pub fn new(start_ms: i64) -> ManualClock {
        ManualClock {
            start: Instant::now(),
            start_ms,
            elapsed_ms: AtomicI64::new(0),
        }
    }

    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.elapsed_ms.fetch_add(ms, Ordering::AcqRel);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_both_readings_only_when_told() {
        let clock = ManualClock::new(1_000);
        let (at, at_ms) = (clock.now(), clock.now_ms());
        assert_eq!(clock.now(), at);
        clock.advance(Duration::from_millis(250));
        assert_eq!(clock.now_ms(), at_ms + 250);
        assert_eq!(clock.now() - at, Duration::from_millis(250));
    }

    #[test]
    fn the_system_clock_reads_the_epoch_in_milliseconds() {
        let ms = SystemClock.now_ms();
        // After 2020-01-01 and before 2100-01-01.
        assert!(ms > 1_577_836_800_000 && ms < 4_102_444_800_000, "{ms}");
    }
}
