//! Lag over time, per group this node coordinates: the design chapter reads lag by its
//! trend and against the retention window, which one snapshot cannot show. A sampler
//! task ([`run`]) takes the group probe's figures every `admin.console.lag.history.interval.ms`
//! and keeps, per group, the last [`POINTS`] samples of its total lag in messages, its
//! lag in seconds and its retention headroom. From them come the trend d(lag)/dt and
//! the at-risk verdict: will retention delete records the group has not read before it
//! catches up? Served on the admin port as `/v1/lag-history` and
//! `/v1/groups/<group>/lag-history`.
//!
//! Bounded: at most [`MAX_GROUPS`] groups (the first by name; the view says when more
//! exist) of at most [`POINTS`] samples each; a group no longer coordinated here is
//! forgotten at the next sample.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use super::groups::GroupLag;
use super::{GroupProbe, NodeView};
use crate::context::now_ms;
use crate::poison::LockTolerant;

/// Samples kept per group: an hour at the default 10 s interval.
pub(crate) const POINTS: usize = 360;
/// Groups followed at once.
pub(crate) const MAX_GROUPS: usize = 1000;
/// Samples the trend is fitted over (the newest ones): 5 minutes at 10 s.
const TREND_POINTS: usize = 30;
/// A time lag growing slower than this (seconds per second, 72 s an hour) is a group
/// keeping pace, give or take what sampling a sawtooth leaves in its low points.
const MIN_GROWTH: f64 = 0.02;

/// One look at a group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct LagSample {
    /// Wall-clock time of the sample, Unix milliseconds.
    pub(crate) at_ms: i64,
    /// Unread committed records, summed over the group's partitions.
    pub(crate) lag_messages: i64,
    /// Time lag of the group: the oldest unread record's age, the largest over its
    /// partitions.
    pub(crate) lag_seconds: f64,
    /// Seconds until retention deletes a record the group has not read, the smallest
    /// over its partitions (0: it already did); None when nothing unread is at risk of
    /// retention (caught up, or retention unbounded).
    pub(crate) retention_headroom_seconds: Option<f64>,
}

impl LagSample {
    /// The group's figures, from its per-partition ones.
    pub(crate) fn of(group: &GroupLag, at_ms: i64) -> LagSample {
        let partitions = &group.partitions;
        LagSample {
            at_ms,
            lag_messages: partitions
                .iter()
                .fold(0i64, |sum, p| sum.saturating_add(p.lag_messages)),
            lag_seconds: partitions
                .iter()
                .map(|p| p.time_lag_seconds)
                .fold(0.0, f64::max),
            retention_headroom_seconds: partitions
                .iter()
                .filter_map(|p| p.retention_headroom_seconds)
                .reduce(f64::min),
        }
    }
}

/// What the samples say about a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LagVerdict {
    /// d(lag)/dt in messages per second, fitted over the newest samples; positive =
    /// producers outpace the group.
    pub(crate) trend_messages_per_second: f64,
    /// d(time lag)/dt in seconds per second: 1 for a stopped group, negative while it
    /// catches up. Taken along the time lag's low points (see [`envelope_slope`]).
    pub(crate) trend_seconds_per_second: f64,
    /// The newest sample's retention headroom.
    pub(crate) retention_headroom_seconds: Option<f64>,
    /// When retention deletes unread records if the trend holds: the headroom shrinks
    /// by at most a second per second (a stopped group), and by the time lag's growth
    /// rate when the group reads slower than producers write. None when it does not
    /// come (caught up, catching up, keeping pace, or retention unbounded).
    pub(crate) projected_loss_seconds: Option<f64>,
    /// Retention will delete (or already deleted) records the group has not read
    /// before it catches up.
    pub(crate) at_risk: bool,
    /// The banner for an at-risk group, e.g. "group billing: retention deletes unread
    /// records in 5 h at the current trend".
    pub(crate) risk_message: Option<String>,
}

/// The least-squares slope of `y` over `x` (per unit of `x`); 0 with fewer than two
/// distinct `x`.
pub(crate) fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in points {
        num += (x - mean_x) * (y - mean_y);
        den += (x - mean_x) * (x - mean_x);
    }
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// The slope of a time lag along its low points: from the smallest value of the older
/// half of `points` to the smallest of the newer half. A consumer that commits every few
/// seconds has a sawtooth time lag (it ages between commits and drops at each), and a
/// straight fit through the teeth tilts with where the window cuts them; the low points
/// are what the group has really read, and they stay flat while it keeps pace.
pub(crate) fn envelope_slope(points: &[(f64, f64)]) -> f64 {
    let lowest = |half: &[(f64, f64)]| {
        half.iter()
            .copied()
            .reduce(|low, p| if p.1 < low.1 { p } else { low })
    };
    let (older, newer) = points.split_at(points.len() / 2);
    match (lowest(older), lowest(newer)) {
        (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) / (b.0 - a.0),
        _ => 0.0,
    }
}

/// The trend and the at-risk verdict of a group from its samples, oldest first.
pub(crate) fn verdict(group: &str, samples: &[LagSample]) -> LagVerdict {
    let recent = &samples[samples.len().saturating_sub(TREND_POINTS)..];
    let seconds_of = |s: &LagSample| s.at_ms as f64 / 1000.0;
    let messages: Vec<(f64, f64)> = recent
        .iter()
        .map(|s| (seconds_of(s), s.lag_messages as f64))
        .collect();
    let time_lag: Vec<(f64, f64)> = recent
        .iter()
        .map(|s| (seconds_of(s), s.lag_seconds))
        .collect();
    let trend_messages = slope(&messages);
    let trend_seconds = envelope_slope(&time_lag);
    let headroom = samples.last().and_then(|s| s.retention_headroom_seconds);
    let projected = match headroom {
        Some(h) if h <= 0.0 => Some(0.0),
        // The oldest unread record ages a second per second, so nothing shrinks the
        // headroom faster than that.
        Some(h) if trend_seconds > MIN_GROWTH => Some(h / trend_seconds.min(1.0)),
        _ => None,
    };
    let risk_message = projected.map(|loss| {
        if loss <= 0.0 {
            format!("group {group}: retention has deleted records the group had not read")
        } else {
            format!(
                "group {group}: retention deletes unread records in {} at the current trend",
                human_duration(loss)
            )
        }
    });
    LagVerdict {
        trend_messages_per_second: trend_messages,
        trend_seconds_per_second: trend_seconds,
        retention_headroom_seconds: headroom,
        projected_loss_seconds: projected,
        at_risk: projected.is_some(),
        risk_message,
    }
}

/// A duration as a person says it: "45 s", "12 min", "5 h", "3.5 d".
pub(crate) fn human_duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 90.0 {
        format!("{} s", s.round())
    } else if s < 90.0 * 60.0 {
        format!("{} min", (s / 60.0).round())
    } else if s < 48.0 * 3600.0 {
        let hours = s / 3600.0;
        if hours < 10.0 {
            format!("{:.1} h", hours).replace(".0 h", " h")
        } else {
            format!("{} h", hours.round())
        }
    } else {
        format!("{:.1} d", s / 86_400.0).replace(".0 d", " d")
    }
}

/// The samples of every followed group.
#[derive(Default)]
pub(crate) struct LagHistory {
    series: Mutex<Series>,
    interval_ms: AtomicU64,
}

#[derive(Default)]
struct Series {
    groups: BTreeMap<String, VecDeque<LagSample>>,
    /// More groups were coordinated here than are followed.
    truncated: bool,
}

/// `/v1/lag-history`: every followed group's verdict (no samples).
#[derive(Serialize)]
pub(crate) struct HistorySummary {
    interval_ms: u64,
    points_max: usize,
    groups_truncated: bool,
    groups: Vec<GroupSummary>,
}

#[derive(Serialize)]
struct GroupSummary {
    group: String,
    samples: usize,
    latest: Option<LagSample>,
    #[serde(flatten)]
    verdict: LagVerdict,
}

/// `/v1/groups/<group>/lag-history`: one group's samples, oldest first, and verdict.
#[derive(Serialize)]
pub(crate) struct GroupHistory {
    group: String,
    interval_ms: u64,
    points_max: usize,
    samples: Vec<LagSample>,
    #[serde(flatten)]
    verdict: LagVerdict,
}

impl LagHistory {
    pub(crate) fn new() -> LagHistory {
        LagHistory::default()
    }

    /// Adds one sample per group of `groups` (the probe's snapshot at `at_ms`) and
    /// forgets the groups not among them.
    pub(crate) fn record(&self, groups: &[GroupLag], at_ms: i64) {
        let mut series = self.series.locked();
        let mut sorted: Vec<&GroupLag> = groups.iter().collect();
        sorted.sort_by(|a, b| a.group.cmp(&b.group));
        series.truncated = sorted.len() > MAX_GROUPS;
        sorted.truncate(MAX_GROUPS);
        series
            .groups
            .retain(|name, _| sorted.binary_search_by(|g| g.group.cmp(name)).is_ok());
        for group in sorted {
            let samples = series.groups.entry(group.group.clone()).or_default();
            samples.push_back(LagSample::of(group, at_ms));
            while samples.len() > POINTS {
                samples.pop_front();
            }
        }
    }

    /// The verdicts of the followed groups `shown` lets through (what the asker may
    /// describe).
    pub(crate) fn summary(&self, shown: impl Fn(&str) -> bool) -> HistorySummary {
        let series = self.series.locked();
        let groups = series
            .groups
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, samples)| {
                let samples: Vec<LagSample> = samples.iter().copied().collect();
                GroupSummary {
                    group: name.clone(),
                    samples: samples.len(),
                    latest: samples.last().copied(),
                    verdict: verdict(name, &samples),
                }
            })
            .collect();
        HistorySummary {
            interval_ms: self.interval_ms.load(Ordering::Relaxed),
            points_max: POINTS,
            groups_truncated: series.truncated,
            groups,
        }
    }

    /// One group's history; None when it is not followed here.
    pub(crate) fn group(&self, name: &str) -> Option<GroupHistory> {
        let series = self.series.locked();
        let samples: Vec<LagSample> = series.groups.get(name)?.iter().copied().collect();
        Some(GroupHistory {
            group: name.to_string(),
            interval_ms: self.interval_ms.load(Ordering::Relaxed),
            points_max: POINTS,
            verdict: verdict(name, &samples),
            samples,
        })
    }
}

/// The sampler: one sample of every group each `interval`, until `stop`. The probe's
/// snapshot reads partitions and batch headers, so it runs on a blocking thread.
pub(crate) async fn run(
    node: Arc<NodeView>,
    probe: Arc<GroupProbe>,
    history: Arc<LagHistory>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let interval = interval.max(Duration::from_millis(100));
    history.interval_ms.store(
        u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        // Partitions led by nodes holding no replica here: asked first (bounded).
        probe.remote.refresh(&node, &*node.groups).await;
        let (node, probe, history) = (Arc::clone(&node), Arc::clone(&probe), Arc::clone(&history));
        let sampled = tokio::task::spawn_blocking(move || {
            let groups = probe.snapshot(&node);
            history.record(&groups, now_ms());
        })
        .await;
        if sampled.is_err() {
            tracing::warn!("a lag-history sample failed");
        }
    }
}

#[cfg(test)]
#[path = "lag_history_tests.rs"]
mod tests;
