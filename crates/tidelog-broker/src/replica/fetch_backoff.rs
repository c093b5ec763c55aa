//! When a follower asks again for a partition whose last fetch failed: soon after the
//! first failure, then twice as long each time up to `replica.fetch.backoff.ms`. Most
//! failures are transient (a new partition whose leader has not applied the same
//! metadata yet answers UNKNOWN_TOPIC_OR_PARTITION for a few milliseconds), and a full
//! backoff for those would leave a new partition's high watermark behind an old one's.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The delay after a partition's first failure.
const FIRST_RETRY: Duration = Duration::from_millis(10);

type Key = (String, i32);

pub(crate) struct FetchBackoff {
    max: Duration,
    /// Partitions not asked for until then.
    delayed: HashMap<Key, Instant>,
    /// Consecutive failures per partition; cleared by an answer without error.
    failures: HashMap<Key, u32>,
}

impl FetchBackoff {
    pub(crate) fn new(max: Duration) -> Self {
        FetchBackoff {
            max,
            delayed: HashMap::new(),
            failures: HashMap::new(),
        }
    }

    /// Forgets delays that have run out.
    pub(crate) fn expire(&mut self, now: Instant) {
        self.delayed.retain(|_, until| *until > now);
    }

    pub(crate) fn is_delayed(&self, key: &Key) -> bool {
        self.delayed.contains_key(key)
    }

    /// When the first delayed partition may be asked for again.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.delayed.values().min().copied()
    }

    /// The partition's fetch failed: it waits, longer after each failure in a row.
    pub(crate) fn failed(&mut self, key: Key, now: Instant) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let delay = FIRST_RETRY
            .saturating_mul(1u32 << (*failures).min(16))
            .min(self.max);
        *failures = failures.saturating_add(1);
        self.delayed.insert(key, now + delay);
    }

    /// The partition's fetch was answered: the next failure starts short again.
    pub(crate) fn succeeded(&mut self, key: &Key) {
        // The common case, on every answered partition: nothing failed, nothing to hash.
        if self.failures.is_empty() {
            return;
        }
        self.failures.remove(key);
    }

    /// Whether no partition is delayed or has failed.
    pub(crate) fn is_empty(&self) -> bool {
        self.delayed.is_empty() && self.failures.is_empty()
    }

    /// Drops what is known of partitions no longer followed from this source.
    pub(crate) fn retain(&mut self, followed: impl Fn(&Key) -> bool) {
        self.delayed.retain(|k, _| followed(k));
        self.failures.retain(|k, _| followed(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_a_short_first_retry_up_to_the_backoff_and_reset_on_success() {
        let now = Instant::now();
        let mut b = FetchBackoff::new(Duration::from_millis(100));
        let key = ("t".to_string(), 0);
        let mut delays = Vec::new();
        for _ in 0..6 {
            b.failed(key.clone(), now);
            delays.push(b.next_due().map(|due| due - now));
            assert!(b.is_delayed(&key));
        }
        let ms = |m| Some(Duration::from_millis(m));
        assert_eq!(
            delays,
            vec![ms(10), ms(20), ms(40), ms(80), ms(100), ms(100)]
        );
        b.expire(now + Duration::from_millis(100));
        assert!(!b.is_delayed(&key));
        b.succeeded(&key);
        b.failed(key.clone(), now);
        assert_eq!(b.next_due().map(|due| due - now), ms(10));
        b.retain(|_| false);
        assert_eq!(b.next_due(), None);
    }
}
