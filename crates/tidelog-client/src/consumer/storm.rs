//! The chapter's rebalance-storm guard. A member that takes longer than
//! `max.poll.interval.ms` between two polls is ejected, which rebalances the group,
//! which grows everyone's backlog, which makes the next batch slower: a loop. It stays
//! away while `max.poll.records × seconds per record < max.poll.interval`; this measures
//! the seconds per record from the gaps between polls and warns before the line is crossed.

use std::time::{Duration, Instant};

/// Warn when a full batch is projected to take this share of the interval.
const WARN_AT: f64 = 0.8;
/// Weight of the newest sample in the moving average.
const SMOOTHING: f64 = 0.3;
/// At most one warning per this long.
const QUIET: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub(crate) struct StormGuard {
    last_return: Option<(Instant, usize)>,
    seconds_per_record: Option<f64>,
    last_warning: Option<Instant>,
}

impl StormGuard {
    /// Called at the start of each poll. Returns the projected seconds a full batch takes
    /// when that reaches the warning line (and logs the warning, rate-limited).
    pub(crate) fn on_poll(
        &mut self,
        now: Instant,
        max_poll_records: usize,
        max_poll_interval: Duration,
    ) -> Option<f64> {
        let (returned_at, count) = self.last_return.take()?;
        if count == 0 {
            return None;
        }
        let sample = now.saturating_duration_since(returned_at).as_secs_f64() / count as f64;
        let average = match self.seconds_per_record {
            Some(previous) => previous + SMOOTHING * (sample - previous),
            None => sample,
        };
        self.seconds_per_record = Some(average);
        let projected = max_poll_records as f64 * average;
        let limit = max_poll_interval.as_secs_f64();
        if projected < WARN_AT * limit {
            return None;
        }
        if self
            .last_warning
            .is_none_or(|at| now.duration_since(at) >= QUIET)
        {
            self.last_warning = Some(now);
            tracing::warn!(
                max_poll_records,
                seconds_per_record = average,
                projected_batch_seconds = projected,
                max_poll_interval_seconds = limit,
                "rebalance storm ahead: max.poll.records x seconds per record approaches \
                 max.poll.interval.ms; lower max.poll.records or raise the interval"
            );
        }
        Some(projected)
    }

    /// Called when poll hands `count` records to the application.
    pub(crate) fn on_return(&mut self, now: Instant, count: usize) {
        self.last_return = Some((now, count));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_when_a_full_batch_would_approach_the_interval() {
        let interval = Duration::from_secs(300);
        let mut guard = StormGuard::default();
        let t0 = Instant::now();
        // 500 records handled in 5 s: 10 ms each, a full batch of 500 takes 5 s. Quiet.
        guard.on_poll(t0, 500, interval);
        guard.on_return(t0, 500);
        assert_eq!(
            guard.on_poll(t0 + Duration::from_secs(5), 500, interval),
            None
        );
        // Same pace with max.poll.records 50,000: 500 s projected, past the 300 s line.
        guard.on_return(t0 + Duration::from_secs(5), 500);
        let projected = guard
            .on_poll(t0 + Duration::from_secs(10), 50_000, interval)
            .expect("warned");
        assert!((projected - 500.0).abs() < 1e-6, "{projected}");
        // Empty polls teach nothing.
        guard.on_return(t0 + Duration::from_secs(10), 0);
        assert_eq!(
            guard.on_poll(t0 + Duration::from_secs(99), 50_000, interval),
            None
        );
    }
}
