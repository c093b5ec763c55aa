use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::super::trend::{Observation, TrendTracker};
use super::{drain_time, lag_figures, size_headroom, LogView};

const NOW: i64 = 1_700_000_000_000;

fn view() -> LogView {
    LogView {
        log_start: 100,
        high_watermark: 250,
        first_unread_ts: Some(NOW - 90_000),
        segment_max_ts: Some(NOW - 60_000),
        retention_ms: Some(3_600_000),
        retention_bytes: None,
        bytes_after_unread_segment: Some(4_000),
        append_bytes_per_second: Some(100.0),
    }
}

fn seen(at: Instant, lag: i64, committed: i64) -> Observation {
    Observation {
        at,
        lag,
        committed,
        log_bytes: 0,
    }
}

#[test]
fn retention_bytes_deletes_the_unread_segment_when_what_follows_it_reaches_the_limit() {
    // 10,000 bytes allowed, 4,000 after the unread segment: 6,000 to come at 100 B/s.
    let sized = LogView {
        retention_ms: None,
        retention_bytes: Some(10_000),
        ..view()
    };
    assert_eq!(size_headroom(&sized), Some(60.0));
    assert_eq!(lag_figures(200, &sized, NOW).2, Some(60.0));
    // Both bounds: the sooner one (time says 3,540 s).
    let both = LogView {
        retention_ms: Some(3_600_000),
        ..sized
    };
    assert_eq!(lag_figures(200, &both, NOW).2, Some(60.0));
    let roomy = LogView {
        retention_bytes: Some(1_000_000),
        ..both
    };
    assert_eq!(lag_figures(200, &roomy, NOW).2, Some(3_540.0));
    // Already past the limit: the next retention pass deletes it.
    let over = LogView {
        retention_bytes: Some(3_000),
        ..sized
    };
    assert_eq!(lag_figures(200, &over, NOW).2, Some(0.0));
    // Nothing arriving: size retention never reaches it.
    let idle = LogView {
        append_bytes_per_second: Some(0.0),
        ..sized
    };
    assert_eq!(lag_figures(200, &idle, NOW).2, None);
    // Unread records below the log start are gone whichever bound took them.
    assert_eq!(lag_figures(40, &sized, NOW).2, Some(0.0));
}

#[test]
fn the_append_rate_counts_only_growth_of_the_log() {
    let mut t = TrendTracker::default();
    let key = || ("g".to_string(), "t".to_string(), 0);
    let start = Instant::now();
    let mut rate = |secs: u64, log_bytes: u64| {
        let o = Observation {
            log_bytes,
            ..seen(start + Duration::from_secs(secs), 0, 0)
        };
        t.observe(key(), o).append_bytes_per_second
    };
    assert_eq!(rate(0, 1_000), None);
    assert_eq!(rate(2, 1_400), Some(200.0));
    // Retention deleted a segment: a shrink is no append, and no negative one.
    assert_eq!(rate(4, 600), Some(100.0));
    assert_eq!(rate(6, 1_200), Some(1_000.0 / 6.0));
}

#[test]
fn lag_in_messages_seconds_and_retention_headroom() {
    let (lag, seconds, headroom) = lag_figures(200, &view(), NOW);
    assert_eq!(lag, 50);
    assert_eq!(seconds, 90.0);
    // The segment holding offset 200 goes at its newest timestamp + retention.ms.
    assert_eq!(headroom, Some(3_540.0));
}

#[test]
fn caught_up_group_has_no_lag_and_no_retention_risk() {
    assert_eq!(lag_figures(250, &view(), NOW), (0, 0.0, None));
    // A committed offset past the high watermark (a truncated log) is not negative lag.
    assert_eq!(lag_figures(300, &view(), NOW), (0, 0.0, None));
}

#[test]
fn retention_that_already_deleted_unread_records_leaves_zero_headroom() {
    let (lag, _, headroom) = lag_figures(40, &view(), NOW);
    assert_eq!(lag, 210);
    assert_eq!(headroom, Some(0.0));
    let overdue = LogView {
        segment_max_ts: Some(NOW - 7_200_000),
        ..view()
    };
    assert_eq!(lag_figures(200, &overdue, NOW).2, Some(0.0));
}

#[test]
fn unbounded_retention_has_no_headroom_figure() {
    let forever = LogView {
        retention_ms: None,
        ..view()
    };
    assert_eq!(lag_figures(200, &forever, NOW).2, None);
}

#[test]
fn trend_is_the_slope_over_kept_samples() {
    let mut t = TrendTracker::default();
    let key = || ("g".to_string(), "t".to_string(), 0);
    let start = Instant::now();
    let mut trend = |at: Duration, lag| t.observe(key(), seen(start + at, lag, 0)).trend;
    assert_eq!(trend(Duration::ZERO, 100), 0.0);
    assert_eq!(trend(Duration::from_secs(2), 120), 10.0);
    // Too close to the newest sample: it replaces it, the slope uses the new value.
    let s = trend(Duration::from_millis(2_500), 110);
    assert!((s - 4.0).abs() < 1e-9, "{s}");
    assert_eq!(trend(Duration::from_secs(5), 50), -10.0);
}

#[test]
fn trend_keeps_a_bounded_window_and_forgets_vanished_partitions() {
    let mut t = TrendTracker::default();
    let key = || ("g".to_string(), "t".to_string(), 0);
    let start = Instant::now();
    for i in 0..40u64 {
        t.observe(
            key(),
            seen(start + Duration::from_secs(i * 2), i as i64 * 2, 0),
        );
    }
    assert_eq!(t.series.get(&key()).map(|s| s.len()), Some(16));
    // Only the last 16 samples count: lag rose 1 per second throughout.
    let slope = t
        .observe(key(), seen(start + Duration::from_secs(80), 80, 0))
        .trend;
    assert!((slope - 1.0).abs() < 1e-9, "{slope}");
    t.retain(&HashSet::new());
    assert!(t.series.is_empty());
}

#[test]
fn consumed_rate_needs_two_observed_commits() {
    let mut t = TrendTracker::default();
    let key = || ("g".to_string(), "t".to_string(), 0);
    let start = Instant::now();
    let mut rate = |secs: u64, committed| {
        t.observe(
            key(),
            seen(start + Duration::from_secs(secs), 10, committed),
        )
        .consume_rate
    };
    // The first look and one commit after it: no rate yet.
    assert_eq!(rate(0, 100), None);
    assert_eq!(rate(5, 150), None);
    // Looks between commits (a consumer committing every 10 s) do not dilute it.
    assert_eq!(rate(10, 150), None);
    assert_eq!(rate(15, 250), Some(10.0));
    assert_eq!(rate(20, 250), Some(10.0));
    // A reset backwards is no consumption.
    assert_eq!(rate(25, 0), None);
}

#[test]
fn drain_time_is_lag_over_the_consumed_rate() {
    assert_eq!(drain_time(0, None), Some(0.0));
    assert_eq!(drain_time(100, Some(20.0)), Some(5.0));
    assert_eq!(drain_time(100, None), None);
    assert_eq!(drain_time(100, Some(0.0)), None);
}
