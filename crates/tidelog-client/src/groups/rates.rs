//! Rates of a group partition from samples taken through a window, measured between the
//! commits observed. A consumer commits every few seconds (5 s by default), so between
//! two commits its committed offset stands still while producers go on: a rate taken
//! over any stretch that is not bounded by commits reads a healthy consumer as slow or
//! stopped, and its lag as growing.

use std::time::Instant;

/// One look at a partition: committed offset (-1: none), log start, log end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at: Instant,
    pub committed: i64,
    pub log_start: i64,
    pub log_end: i64,
}

impl Sample {
    /// Messages the group has not read (from the log start when it never committed,
    /// as an earliest-reset consumer would).
    pub fn lag(&self) -> i64 {
        let from = if self.committed < 0 {
            self.log_start
        } else {
            self.committed.max(self.log_start)
        };
        (self.log_end - from).max(0)
    }
}

/// What the samples say about consumption.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitRates {
    /// Commits seen: samples whose committed offset differs from the one before.
    pub commits: usize,
    /// Committed offsets per second from the first to the last commit seen; `None`
    /// with fewer than two commits, or when the offset went back (a reset).
    pub consume_rate: Option<f64>,
    /// d(lag)/dt in messages per second between the same two commits (`None` likewise).
    pub trend: Option<f64>,
    /// Whether the lag certainly grew: the least it can have been at the last commit
    /// seen is above the most it can have been at the first, and it never fell between
    /// two commits. A commit is seen at the first sample after it, so the log end at the
    /// commit lies between that sample's and the one before: taking the lag at the
    /// sample alone would read records produced since the commit as growth, and a
    /// consumer that keeps up as a falling-behind one.
    pub growing: bool,
}

/// A commit between two samples: the lag at the commit, at least and at most.
fn lag_bounds(before: &Sample, after: &Sample) -> (i64, i64) {
    let least = Sample {
        log_end: before.log_end.min(after.log_end),
        ..*after
    };
    (least.lag(), after.lag())
}

impl CommitRates {
    /// Reads the rates out of samples in time order.
    pub fn from_samples(samples: &[Sample]) -> CommitRates {
        let pairs: Vec<(&Sample, &Sample)> = samples
            .iter()
            .zip(samples.iter().skip(1))
            .filter(|(before, after)| after.committed != before.committed)
            .collect();
        let commits: Vec<&Sample> = pairs.iter().map(|(_, after)| *after).collect();
        let none = CommitRates {
            commits: commits.len(),
            consume_rate: None,
            trend: None,
            growing: false,
        };
        let (Some(first), Some(last)) = (commits.first(), commits.last()) else {
            return none;
        };
        let seconds = last.at.saturating_duration_since(first.at).as_secs_f64();
        if commits.len() < 2 || seconds <= 0.0 || last.committed < first.committed {
            return none;
        }
        let trend = (last.lag() - first.lag()) as f64 / seconds;
        let (first_pair, last_pair) = (pairs[0], pairs[pairs.len() - 1]);
        let (_, most_at_first) = lag_bounds(first_pair.0, first_pair.1);
        let (least_at_last, _) = lag_bounds(last_pair.0, last_pair.1);
        let never_fell = commits.windows(2).all(|w| w[1].lag() >= w[0].lag());
        CommitRates {
            consume_rate: Some((last.committed - first.committed) as f64 / seconds),
            trend: Some(trend),
            growing: trend > 0.0 && least_at_last > most_at_first && never_fell,
            ..none
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Samples one second apart: (committed, log end).
    fn series(points: &[(i64, i64)]) -> Vec<Sample> {
        let start = Instant::now();
        points
            .iter()
            .zip(0u64..)
            .map(|(&(committed, log_end), i)| Sample {
                at: start + Duration::from_secs(i),
                committed,
                log_start: 0,
                log_end,
            })
            .collect()
    }

    #[test]
    fn lag_counts_from_the_log_start_when_nothing_was_committed() {
        let s = |committed, log_start, log_end| Sample {
            at: Instant::now(),
            committed,
            log_start,
            log_end,
        };
        assert_eq!(s(-1, 10, 25).lag(), 15);
        assert_eq!(s(20, 10, 25).lag(), 5);
        assert_eq!(s(5, 10, 25).lag(), 15); // committed offset already deleted
        assert_eq!(s(30, 10, 25).lag(), 0);
    }

    #[test]
    fn a_consumer_that_keeps_up_between_commits_is_not_growing() {
        // 10 records/s produced; the consumer commits the log end every 5 s.
        let points: Vec<(i64, i64)> = (0..16).map(|t| (t / 5 * 50, t * 10)).collect();
        let r = CommitRates::from_samples(&series(&points));
        assert_eq!(r.commits, 3);
        assert_eq!(r.consume_rate, Some(10.0));
        assert_eq!(r.trend, Some(0.0));
        assert!(!r.growing);
    }

    #[test]
    fn one_commit_or_none_gives_no_rate() {
        let stopped = CommitRates::from_samples(&series(&[(5, 10), (5, 20), (5, 30)]));
        assert_eq!(
            (stopped.commits, stopped.consume_rate, stopped.growing),
            (0, None, false)
        );
        let once = CommitRates::from_samples(&series(&[(5, 10), (9, 20), (9, 30)]));
        assert_eq!((once.commits, once.trend), (1, None));
    }

    #[test]
    fn lag_rising_at_every_commit_is_growing() {
        let r = CommitRates::from_samples(&series(&[(0, 10), (5, 20), (10, 40), (15, 60)]));
        assert_eq!(r.commits, 3);
        assert_eq!(r.consume_rate, Some(5.0));
        assert_eq!(r.trend, Some(15.0));
        assert!(r.growing);
        // Up then down: the slope alone is positive, but the lag does not keep rising.
        let wobble = CommitRates::from_samples(&series(&[(0, 0), (5, 10), (10, 30), (15, 21)]));
        assert!(wobble.trend.is_some_and(|t| t > 0.0) && !wobble.growing);
    }

    #[test]
    fn records_produced_between_a_commit_and_the_sample_that_sees_it_are_not_growth() {
        // The consumer commits the log end; the sample that sees the second commit comes
        // later after it than the first one did, so the lag at the samples rises (10,
        // then 40) although the group keeps up exactly.
        let r = CommitRates::from_samples(&series(&[(0, 0), (100, 110), (100, 190), (200, 240)]));
        assert_eq!(r.commits, 2);
        assert!(r.trend.is_some_and(|t| t > 0.0));
        assert!(!r.growing);
    }

    #[test]
    fn a_reset_backwards_is_not_consumption() {
        let r = CommitRates::from_samples(&series(&[(50, 60), (60, 70), (0, 70)]));
        assert_eq!((r.commits, r.consume_rate), (2, None));
    }
}
