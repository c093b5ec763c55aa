//! A sampled rate as Kafka's `Rate` over a `SampledStat` measures one: `samples`
//! buckets of `window_ms` each, a bucket starting at the first value recorded after
//! the previous one's window ended, buckets older than `samples × window_ms`
//! forgotten. The rate is the sum of the live buckets over the time they span, that
//! span counted as at least `samples - 1` whole windows so that one burst after a
//! quiet spell is not measured over a few milliseconds.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) samples: u32,
    pub(crate) window_ms: u64,
}

impl Window {
    /// How long a sample is kept: the whole measured span.
    pub(crate) fn span_ms(&self) -> u64 {
        self.window_ms.saturating_mul(u64::from(self.samples))
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SampledRate {
    /// `(start_ms, total)`, oldest first; at most `samples` of them.
    samples: VecDeque<(u64, f64)>,
}

impl SampledRate {
    pub(crate) fn new() -> SampledRate {
        SampledRate {
            samples: VecDeque::new(),
        }
    }

    fn purge(&mut self, window: Window, now_ms: u64) {
        let span = window.span_ms();
        while self
            .samples
            .front()
            .is_some_and(|(start, _)| now_ms.saturating_sub(*start) >= span)
        {
            self.samples.pop_front();
        }
    }

    pub(crate) fn record(&mut self, window: Window, value: f64, now_ms: u64) {
        self.purge(window, now_ms);
        match self.samples.back_mut() {
            Some((start, total)) if now_ms < start.saturating_add(window.window_ms) => {
                *total += value;
            }
            _ => {
                self.samples.push_back((now_ms, value));
                while self.samples.len() > window.samples as usize {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// Takes back a value recorded just before (Kafka's unrecord of a fetch that is
    /// answered empty because it is throttled).
    pub(crate) fn unrecord(&mut self, value: f64) {
        if let Some((_, total)) = self.samples.back_mut() {
            *total -= value;
        }
    }

    /// The span the rate is measured over, in milliseconds (Kafka's `windowSize`).
    pub(crate) fn window_size_ms(&mut self, window: Window, now_ms: u64) -> u64 {
        self.purge(window, now_ms);
        let oldest = self.samples.front().map_or(now_ms, |(start, _)| *start);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / window.window_ms.max(1);
        let min_full = u64::from(window.samples.saturating_sub(1));
        if full < min_full {
            elapsed += (min_full - full) * window.window_ms;
        }
        elapsed.max(1)
    }

    /// Units per second.
    pub(crate) fn rate(&mut self, window: Window, now_ms: u64) -> f64 {
        let size_ms = self.window_size_ms(window, now_ms);
        let total: f64 = self.samples.iter().map(|(_, t)| t).sum();
        total * 1000.0 / size_ms as f64
    }

    /// When the newest sample was started (what inactivity is measured from).
    pub(crate) fn last_ms(&self) -> Option<u64> {
        self.samples.back().map(|(start, _)| *start)
    }
}

/// Kafka's `QuotaUtils.throttleTime`: how long the client must pause for the measured
/// `rate` to come back to `bound`: `(rate - bound) / bound × window size`, never
/// negative.
pub(crate) fn throttle_ms(rate: f64, bound: f64, window_size_ms: u64) -> u64 {
    if bound.is_nan() || bound <= 0.0 || rate <= bound {
        return 0;
    }
    let ms = (rate - bound) * window_size_ms as f64 / bound;
    if ms.is_finite() {
        ms as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Window = Window {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_first_burst_is_measured_over_ten_windows() {
        let mut r = SampledRate::new();
        r.record(W, 10_000.0, 5_000);
        // 10 000 bytes over at least 10 whole windows: 1 000 B/s.
        assert_eq!(r.window_size_ms(W, 5_000), 10_000);
        assert!((r.rate(W, 5_000) - 1_000.0).abs() < 1e-9);
    }

    #[test]
    fn samples_roll_and_expire() {
        let mut r = SampledRate::new();
        for second in 0..30u64 {
            r.record(W, 100.0, second * 1000);
        }
        // Only the last 11 samples count, spanning 10 s + the time into the newest.
        let now = 29_500;
        assert_eq!(r.window_size_ms(W, now), 10_500);
        let rate = r.rate(W, now);
        assert!((rate - 1100.0 / 10.5).abs() < 1e-6, "{rate}");
        // After a whole span of silence nothing is left.
        assert_eq!(r.rate(W, 29_000 + 11_000), 0.0);
        assert!(r.last_ms().is_none());
    }

    #[test]
    fn kafkas_throttle_formula() {
        // Twice the quota over a 10 s window: 10 s of pause brings it back.
        assert_eq!(throttle_ms(2000.0, 1000.0, 10_000), 10_000);
        assert_eq!(throttle_ms(1500.0, 1000.0, 10_000), 5_000);
        assert_eq!(throttle_ms(1000.0, 1000.0, 10_000), 0);
        assert_eq!(throttle_ms(999.0, 1000.0, 10_000), 0);
        assert_eq!(throttle_ms(5.0, 0.0, 10_000), 0);
    }

    #[test]
    fn unrecord_takes_back_the_last_value() {
        let mut r = SampledRate::new();
        r.record(W, 500.0, 0);
        r.record(W, 700.0, 10);
        r.unrecord(700.0);
        // 500 bytes over 10 windows and the 10 ms into the newest.
        assert!((r.rate(W, 10) - 500.0 / 10.01).abs() < 1e-9);
    }
}
