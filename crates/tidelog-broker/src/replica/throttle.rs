//! The follower replication throttle (follower.replication.throttled.rate).

use std::time::Duration;

use crate::poison::LockTolerant;
use tokio::time::Instant;

/// follower.replication.throttled.rate, shared by every fetcher of the node: each
/// fetched byte books time on one clock, and a fetcher waits until the time its bytes
/// booked has come, so all fetchers together stay under the rate.
pub(crate) struct Throttle {
    /// A dynamic config: re-set whenever the image is applied.
    bytes_per_sec: std::sync::atomic::AtomicI64,
    next_free: std::sync::Mutex<Instant>,
}

impl Throttle {
    pub(crate) fn new(bytes_per_sec: i64) -> Self {
        Throttle {
            bytes_per_sec: std::sync::atomic::AtomicI64::new(bytes_per_sec),
            next_free: std::sync::Mutex::new(Instant::now()),
        }
    }

    /// Changes the rate for the bytes booked from now on.
    pub(crate) fn set_rate(&self, bytes_per_sec: i64) {
        self.bytes_per_sec
            .store(bytes_per_sec, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long after `now` a fetcher that just received `bytes` must wait (at most
    /// 10 s for one response). Zero when the rate is off.
    pub(crate) fn book(&self, bytes: usize, now: Instant) -> Duration {
        let rate = self
            .bytes_per_sec
            .load(std::sync::atomic::Ordering::Relaxed);
        if bytes == 0 || rate == i64::MAX || rate <= 0 {
            return Duration::ZERO;
        }
        let cost = Duration::from_secs_f64((bytes as f64 / rate as f64).min(10.0));
        let mut next = self.next_free.locked();
        *next = (*next).max(now) + cost;
        next.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn the_throttle_is_shared_and_books_time_per_byte() {
        let t = Throttle::new(1_000);
        let now = tokio::time::Instant::now();
        assert_eq!(t.book(0, now), std::time::Duration::ZERO);
        assert_eq!(t.book(500, now).as_millis(), 500);
        // A second fetcher's bytes queue behind the first one's.
        assert_eq!(t.book(500, now).as_millis(), 1_000);
        let later = now + std::time::Duration::from_secs(5);
        assert_eq!(t.book(100, later).as_millis(), 100);
        let off = Throttle::new(i64::MAX);
        assert_eq!(off.book(1 << 30, now), std::time::Duration::ZERO);
        // A dynamic config change applies to the bytes booked next.
        off.set_rate(2_000);
        assert_eq!(off.book(1_000, later).as_millis(), 500);
    }
}
