//! d(lag)/dt: the slope of a group partition's lag over its recent observations.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Recent (time, lag) observations per group partition, for d(lag)/dt: at most
/// `TREND_SAMPLES`, at least `TREND_SPACING` apart, none older than `TREND_WINDOW`.
#[derive(Default)]
pub(super) struct TrendTracker {
    pub(super) series: HashMap<(String, String, i32), VecDeque<(Instant, i64)>>,
}

const TREND_SAMPLES: usize = 16;
const TREND_SPACING: Duration = Duration::from_secs(1);
const TREND_WINDOW: Duration = Duration::from_secs(600);

impl TrendTracker {
    /// Adds an observation and returns the slope over the kept ones (0 with fewer than two).
    pub(super) fn observe(&mut self, key: (String, String, i32), now: Instant, lag: i64) -> f64 {
        let samples = self.series.entry(key).or_default();
        match samples.back() {
            // Too soon after the newest: the newest moves forward instead, so a sample
            // is only kept once the next one is far enough from it.
            Some(&(t, _))
                if samples.len() > 1 && now.saturating_duration_since(t) < TREND_SPACING =>
            {
                samples.pop_back();
            }
            _ => {}
        }
        samples.push_back((now, lag));
        while samples.len() > TREND_SAMPLES
            || samples
                .front()
                .is_some_and(|&(t, _)| now.saturating_duration_since(t) > TREND_WINDOW)
        {
            samples.pop_front();
        }
        match (samples.front(), samples.back()) {
            (Some(&(t0, l0)), Some(&(t1, l1))) if t1 > t0 => {
                (l1 - l0) as f64 / t1.saturating_duration_since(t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Forgets partitions no longer reported, keeping the map bounded by what exists.
    pub(super) fn retain(&mut self, alive: &HashSet<(String, String, i32)>) {
        self.series.retain(|k, _| alive.contains(k));
    }
}
