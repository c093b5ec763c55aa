//! d(lag)/dt, the consumed rate and the append rate in bytes of a group partition, over
//! its recent observations.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// One look at a group partition: when, its lag, its committed offset and the size of
/// its log.
#[derive(Debug, Clone, Copy)]
pub(super) struct Observation {
    pub(super) at: Instant,
    pub(super) lag: i64,
    pub(super) committed: i64,
    pub(super) log_bytes: u64,
}

/// What the kept observations say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Rates {
    /// d(lag)/dt over the kept observations (0 with fewer than two).
    pub(super) trend: f64,
    /// Committed offsets per second between the first and the last observed commit;
    /// `None` until two commits were observed (a commit shows as a committed offset
    /// different from the one before). A rate over a stretch without commits would
    /// read a consumer that commits every few seconds as stopped.
    pub(super) consume_rate: Option<f64>,
    /// Bytes appended to the log per second over the kept observations: the growth of
    /// its size, counting only rises (retention and DeleteRecords shrink it); `None`
    /// with fewer than two observations.
    pub(super) append_bytes_per_second: Option<f64>,
}

/// Recent observations per group partition: at most `TREND_SAMPLES`, at least
/// `TREND_SPACING` apart, none older than `TREND_WINDOW`.
#[derive(Default)]
pub(super) struct TrendTracker {
    pub(super) series: HashMap<(String, String, i32), VecDeque<Observation>>,
}

const TREND_SAMPLES: usize = 16;
const TREND_SPACING: Duration = Duration::from_secs(1);
const TREND_WINDOW: Duration = Duration::from_secs(600);

impl TrendTracker {
    /// Adds an observation and returns the rates over the kept ones.
    pub(super) fn observe(&mut self, key: (String, String, i32), seen: Observation) -> Rates {
        let now = seen.at;
        let samples = self.series.entry(key).or_default();
        match samples.back() {
            // Too soon after the newest: the newest moves forward instead, so a sample
            // is only kept once the next one is far enough from it.
            Some(o) if samples.len() > 1 && now.saturating_duration_since(o.at) < TREND_SPACING => {
                samples.pop_back();
            }
            _ => {}
        }
        samples.push_back(seen);
        while samples.len() > TREND_SAMPLES
            || samples
                .front()
                .is_some_and(|o| now.saturating_duration_since(o.at) > TREND_WINDOW)
        {
            samples.pop_front();
        }
        let trend = match (samples.front(), samples.back()) {
            (Some(first), Some(last)) if last.at > first.at => {
                (last.lag - first.lag) as f64
                    / last.at.saturating_duration_since(first.at).as_secs_f64()
            }
            _ => 0.0,
        };
        Rates {
            trend,
            consume_rate: consume_rate(samples),
            append_bytes_per_second: append_rate(samples),
        }
    }

    /// Forgets partitions no longer reported, keeping the map bounded by what exists.
    pub(super) fn retain(&mut self, alive: &HashSet<(String, String, i32)>) {
        self.series.retain(|k, _| alive.contains(k));
    }
}

/// See [`Rates::consume_rate`]; `None` also when the offset went back (a reset).
fn consume_rate(samples: &VecDeque<Observation>) -> Option<f64> {
    let commits: Vec<&Observation> = samples
        .iter()
        .zip(samples.iter().skip(1))
        .filter(|(before, after)| after.committed != before.committed)
        .map(|(_, after)| after)
        .collect();
    let (first, last) = (commits.first()?, commits.last()?);
    if commits.len() < 2 {
        return None;
    }
    let seconds = last.at.saturating_duration_since(first.at).as_secs_f64();
    let rate = (last.committed - first.committed) as f64 / seconds;
    (seconds > 0.0 && rate > 0.0).then_some(rate)
}

/// See [`Rates::append_bytes_per_second`].
fn append_rate(samples: &VecDeque<Observation>) -> Option<f64> {
    let (first, last) = (samples.front()?, samples.back()?);
    let seconds = last.at.saturating_duration_since(first.at).as_secs_f64();
    if seconds <= 0.0 {
        return None;
    }
    let grown: u64 = samples
        .iter()
        .zip(samples.iter().skip(1))
        .map(|(before, after)| after.log_bytes.saturating_sub(before.log_bytes))
        .sum();
    Some(grown as f64 / seconds)
}
