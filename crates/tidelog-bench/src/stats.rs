//! Small arithmetic shared by every measurement: rates, percentiles, medians and the
//! latency histogram (nanosecond resolution, 3 significant digits, up to one minute).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Bytes over time in MB/s (10^6 bytes per second, as disks and NICs are quoted).
pub(crate) fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
}

/// The `p`-th percentile (nearest rank) of durations already sorted ascending, in µs.
pub(crate) fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted[index].as_secs_f64() * 1e6
}

/// Median of a few run results (the targets table reports medians of runs).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// A latency histogram; values past one minute are clamped to the top bucket.
pub(crate) struct Latencies {
    histogram: Histogram<u64>,
}

/// The percentiles every latency report prints, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct LatencySummary {
    pub(crate) count: u64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
    /// (percentile, µs) pairs for plotting.
    pub(crate) curve: Vec<(f64, f64)>,
}

const MAX_NANOS: u64 = 60_000_000_000;

impl Latencies {
    // Bounds and precision are constants hdrhistogram accepts (low >= 1, high >= 2 * low,
    // 3 digits); no input reaches this, so it cannot fail at run time.
    #[allow(clippy::expect_used)]
    pub(crate) fn new() -> Self {
        let histogram =
            Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("constant histogram bounds");
        Self { histogram }
    }

    pub(crate) fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(MAX_NANOS);
        self.histogram.saturating_record(nanos.clamp(1, MAX_NANOS));
    }

    pub(crate) fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides, so `add` cannot fail; a failure would only lose samples.
        let _ = self.histogram.add(&other.histogram);
    }

    pub(crate) fn summary(&self) -> LatencySummary {
        let us = |q: f64| self.histogram.value_at_quantile(q) as f64 / 1e3;
        let curve = [
            0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
        ]
        .iter()
        .map(|p| (*p, us(p / 100.0)))
        .collect();
        LatencySummary {
            count: self.histogram.len(),
            p50_us: us(0.50),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: self.histogram.max() as f64 / 1e3,
            curve,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_percentiles() {
        assert!((mb_per_s(2_000_000, Duration::from_secs(2)) - 1.0).abs() < 1e-9);
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert!((percentile_us(&sorted, 50.0) - 50.0).abs() < 1e-6);
        assert!((percentile_us(&sorted, 99.0) - 99.0).abs() < 1e-6);
        assert!((percentile_us(&sorted, 100.0) - 100.0).abs() < 1e-6);
        assert_eq!(percentile_us(&[], 50.0), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn histogram_percentiles_within_precision() {
        let mut h = Latencies::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_us - 500.0).abs() <= 1.0, "{}", s.p50_us);
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{}", s.p99_us);
        assert!((s.max_us - 1000.0).abs() <= 1.0, "{}", s.max_us);
        let mut other = Latencies::new();
        other.record(Duration::from_secs(120));
        h.merge(&other);
        assert_eq!(h.summary().count, 1001);
        assert!(h.summary().max_us >= 59_000_000.0);
    }
}
