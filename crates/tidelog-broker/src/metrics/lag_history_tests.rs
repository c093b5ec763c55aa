use super::*;
use crate::metrics::groups::PartitionLag;

fn partition(lag: i64, time_lag: f64, headroom: Option<f64>) -> PartitionLag {
    PartitionLag {
        topic: "t".into(),
        partition: 0,
        committed_offset: 0,
        high_watermark: lag,
        log_start_offset: 0,
        lag_messages: lag,
        time_lag_seconds: time_lag,
        lag_seconds: time_lag,
        drain_time_seconds: None,
        lag_trend_per_second: 0.0,
        retention_headroom_seconds: headroom,
    }
}

fn group(name: &str, partitions: Vec<PartitionLag>) -> GroupLag {
    GroupLag {
        group: name.into(),
        group_type: String::new(),
        state: "Empty".into(),
        protocol_type: String::new(),
        generation: 0,
        members: 0,
        rebalances: 0,
        member_details: Vec::new(),
        partitions,
    }
}

fn sample(at_s: i64, lag: i64, time_lag: f64, headroom: Option<f64>) -> LagSample {
    LagSample {
        at_ms: at_s * 1000,
        lag_messages: lag,
        lag_seconds: time_lag,
        retention_headroom_seconds: headroom,
    }
}

#[test]
fn a_group_sample_sums_messages_takes_the_oldest_lag_and_the_nearest_retention() {
    let g = group(
        "g",
        vec![
            partition(10, 4.0, Some(300.0)),
            partition(5, 9.0, Some(120.0)),
            partition(0, 0.0, None),
        ],
    );
    assert_eq!(
        LagSample::of(&g, 7),
        LagSample {
            at_ms: 7,
            lag_messages: 15,
            lag_seconds: 9.0,
            retention_headroom_seconds: Some(120.0),
        }
    );
    assert_eq!(
        LagSample::of(&group("empty", vec![]), 7).retention_headroom_seconds,
        None
    );
}

#[test]
fn slope_is_the_least_squares_fit() {
    assert_eq!(slope(&[]), 0.0);
    assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
    assert_eq!(slope(&[(1.0, 5.0), (1.0, 9.0)]), 0.0);
    assert!((slope(&[(0.0, 0.0), (1.0, 2.0), (2.0, 4.0)]) - 2.0).abs() < 1e-12);
    // Noise around a line keeps its slope.
    let noisy = [(0.0, 1.0), (1.0, 2.0), (2.0, 5.0), (3.0, 6.0)];
    assert!((slope(&noisy) - 1.8).abs() < 1e-12);
}

#[test]
fn the_time_lag_trend_follows_its_low_points() {
    assert_eq!(envelope_slope(&[]), 0.0);
    assert_eq!(envelope_slope(&[(0.0, 3.0)]), 0.0);
    assert_eq!(envelope_slope(&[(0.0, 3.0), (2.0, 4.0)]), 0.5);
    // A sawtooth keeping pace: flat, wherever the window cuts its teeth.
    for n in [10, 28, 30, 33] {
        let teeth: Vec<(f64, f64)> = (0..n).map(|t| (t as f64, (t % 5) as f64)).collect();
        assert_eq!(envelope_slope(&teeth), 0.0, "{n} samples");
    }
    // The same teeth on a rising floor: the floor's rise.
    let rising: Vec<(f64, f64)> = (0..30)
        .map(|t| (t as f64, 0.25 * t as f64 + (t % 5) as f64))
        .collect();
    assert!((envelope_slope(&rising) - 0.25).abs() < 1e-9);
}

#[test]
fn a_stopped_group_loses_data_when_its_headroom_runs_out() {
    // Stopped: the time lag grows a second per second, the headroom shrinks as much.
    let samples: Vec<LagSample> = (0..10)
        .map(|t| sample(t, 100, 50.0 + t as f64, Some(18_000.0 - t as f64)))
        .collect();
    let v = verdict("billing", &samples);
    assert!((v.trend_seconds_per_second - 1.0).abs() < 1e-9);
    assert_eq!(v.trend_messages_per_second, 0.0);
    assert_eq!(v.retention_headroom_seconds, Some(17_991.0));
    assert!(v.at_risk);
    assert!((v.projected_loss_seconds.unwrap() - 17_991.0).abs() < 1e-6);
    assert_eq!(
        v.risk_message.as_deref(),
        Some("group billing: retention deletes unread records in 5 h at the current trend")
    );
}

#[test]
fn a_slow_group_loses_data_later_than_a_stopped_one() {
    // Reads at half the produced rate: the time lag grows half a second per second.
    let samples: Vec<LagSample> = (0..10)
        .map(|t| sample(t, 10 * t, 0.5 * t as f64, Some(3600.0)))
        .collect();
    let v = verdict("slow", &samples);
    assert!((v.trend_messages_per_second - 10.0).abs() < 1e-9);
    assert!((v.projected_loss_seconds.unwrap() - 7200.0).abs() < 1e-6);
    assert!(v.at_risk);
}

#[test]
fn a_group_catching_up_or_keeping_pace_is_not_at_risk() {
    let catching_up: Vec<LagSample> = (0..10)
        .map(|t| sample(t, 1000 - 50 * t, 100.0 - 5.0 * t as f64, Some(600.0)))
        .collect();
    let v = verdict("g", &catching_up);
    assert!(!v.at_risk);
    assert_eq!(v.projected_loss_seconds, None);
    assert_eq!(v.risk_message, None);
    // A consumer committing every 5 s: a sawtooth time lag, flat on average.
    let steady: Vec<LagSample> = (0..30)
        .map(|t| sample(t, 10, (t % 5) as f64, Some(600_000.0)))
        .collect();
    assert!(!verdict("g", &steady).at_risk);
    // Nothing unread (or retention unbounded): no headroom, no risk, however it grows.
    let unbounded: Vec<LagSample> = (0..10).map(|t| sample(t, t, t as f64, None)).collect();
    assert!(!verdict("g", &unbounded).at_risk);
}

#[test]
fn retention_that_already_deleted_unread_records_is_at_risk_now() {
    let samples = [sample(0, 5, 80.0, Some(0.0))];
    let v = verdict("late", &samples);
    assert!(v.at_risk);
    assert_eq!(v.projected_loss_seconds, Some(0.0));
    assert_eq!(
        v.risk_message.as_deref(),
        Some("group late: retention has deleted records the group had not read")
    );
}

#[test]
fn the_trend_is_fitted_over_the_newest_samples_only() {
    // An hour ago it fell behind fast; for the newest samples it has been catching up.
    let mut samples: Vec<LagSample> = (0..100)
        .map(|t| sample(t, 100 * t, t as f64, Some(1000.0)))
        .collect();
    samples.extend((100..140).map(|t| {
        sample(
            t,
            10_000 - 10 * (t - 100),
            100.0 - (t - 100) as f64,
            Some(1000.0),
        )
    }));
    let v = verdict("g", &samples);
    assert!((v.trend_messages_per_second + 10.0).abs() < 1e-9);
    assert!(!v.at_risk);
}

#[test]
fn history_is_bounded_in_points_and_groups_and_forgets_gone_groups() {
    let history = LagHistory::new();
    for t in 0..(POINTS as i64 + 5) {
        history.record(&[group("a", vec![partition(t, 0.0, None)])], t);
    }
    let a = history.group("a").unwrap();
    assert_eq!(a.samples.len(), POINTS);
    assert_eq!(a.samples[0].at_ms, 5);
    assert_eq!(a.samples.last().unwrap().lag_messages, POINTS as i64 + 4);

    history.record(&[group("b", vec![])], 1000);
    assert!(
        history.group("a").is_none(),
        "a group no longer coordinated is forgotten"
    );
    assert_eq!(history.group("b").unwrap().samples.len(), 1);

    let many: Vec<GroupLag> = (0..MAX_GROUPS + 3)
        .map(|i| group(&format!("g{i:05}"), vec![]))
        .collect();
    history.record(&many, 2000);
    let summary = history.summary(|_| true);
    assert_eq!(summary.groups.len(), MAX_GROUPS);
    assert!(summary.groups_truncated);
    // Only the groups the asker may describe are summarised.
    let shown = history.summary(|g| g == "g00001");
    assert_eq!(shown.groups.len(), 1);
    assert_eq!(shown.groups[0].group, "g00001");
    assert!(history.group(&format!("g{:05}", MAX_GROUPS + 2)).is_none());
}

#[test]
fn durations_read_as_a_person_says_them() {
    assert_eq!(human_duration(45.2), "45 s");
    assert_eq!(human_duration(-3.0), "0 s");
    assert_eq!(human_duration(720.0), "12 min");
    assert_eq!(human_duration(18_000.0), "5 h");
    assert_eq!(human_duration(5_400.0), "1.5 h");
    assert_eq!(human_duration(3.5 * 86_400.0), "3.5 d");
    assert_eq!(human_duration(36.0 * 3600.0), "36 h");
}
