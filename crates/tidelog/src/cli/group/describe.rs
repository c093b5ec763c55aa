//! `tidelog group describe`: members, assignments and per-partition lag, as text or JSON.
//!
//! Two lag figures in seconds, under two names (the same in `/metrics`, `/v1/groups` and
//! docs/operations.md): the time lag, how old the oldest unread record is, and the drain
//! time, how long the group needs to read its lag at the rate it consumes. Rates come
//! from the commits seen in the window (`tidelog_client::groups::CommitRates`); no
//! warning rests on fewer than two.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::bail;
use serde_json::json;
use tidelog_client::groups::{GroupDescription, LagWindow, PartitionLag};
use tidelog_client::Client;

use crate::cli::output::{print_json, OutputArgs};
use crate::cli::progress::Progress;

pub(super) async fn describe(
    client: &mut Client,
    group: &str,
    window: Duration,
    output: OutputArgs,
) -> anyhow::Result<()> {
    let description = client.describe_group(group).await?;
    let mut progress = Progress::new();
    let total = window.as_secs_f64();
    let lags = client
        .group_lag(group, LagWindow::new(window), |elapsed| {
            progress.show(&format!(
                "watching commits of {group}: {:.0}s of {total:.0}s",
                elapsed.as_secs_f64().min(total)
            ));
        })
        .await?;
    progress.finish();
    if description.state == "Dead" && lags.is_empty() {
        bail!("group {group} does not exist");
    }
    if output.json() {
        print_json(&to_json(&description, &lags, window))
    } else {
        print!("{}", render(&description, &lags, window));
        Ok(())
    }
}

fn protocol(d: &GroupDescription) -> String {
    match (d.protocol_type.as_str(), d.protocol.as_str()) {
        ("", _) => "-".to_string(),
        (t, "") => t.to_string(),
        (t, p) => format!("{t}/{p}"),
    }
}

fn to_json(d: &GroupDescription, lags: &[PartitionLag], window: Duration) -> serde_json::Value {
    let members: Vec<_> = d
        .members
        .iter()
        .map(|m| {
            let listed = |a: &[(String, Vec<i32>)]| -> Vec<serde_json::Value> {
                a.iter()
                    .map(|(topic, partitions)| json!({"topic": topic, "partitions": partitions}))
                    .collect()
            };
            let mut member = json!({
                "member_id": m.member_id, "instance_id": m.instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "assignment": listed(&m.assignment),
            });
            if let Some(c) = &m.consumer {
                member["member_epoch"] = json!(c.member_epoch);
                member["target_assignment"] = json!(listed(&c.target));
            }
            member
        })
        .collect();
    let partitions: Vec<_> = lags
        .iter()
        .map(|l| {
            json!({
                "topic": l.topic, "partition": l.partition,
                "committed_offset": (l.committed >= 0).then_some(l.committed),
                "log_start_offset": l.log_start, "log_end_offset": l.log_end,
                "lag_messages": l.lag,
                "time_lag_seconds": l.time_lag_ms.map(|ms| ms as f64 / 1000.0),
                "drain_time_seconds": l.drain_time_seconds,
                "consume_rate_per_second": l.rates.consume_rate,
                "lag_trend_per_second": l.rates.trend,
                "commits_observed": l.rates.commits,
                "retention_headroom_seconds": l.retention_left_ms.map(|ms| ms.max(0) as f64 / 1000.0),
                "owner": l.owner,
            })
        })
        .collect();
    let mut out = json!({
        "group": d.group_id, "state": d.state, "protocol": protocol(d),
        "window_seconds": window.as_secs_f64(),
        "members": members, "partitions": partitions,
        "warnings": lags.iter().flat_map(warnings).collect::<Vec<_>>(),
        "notes": lags.iter().filter_map(|l| note(l, window)).collect::<Vec<_>>(),
    });
    if let Some(c) = &d.consumer {
        out["group_protocol"] = json!("consumer");
        out["group_epoch"] = json!(c.group_epoch);
        out["assignment_epoch"] = json!(c.assignment_epoch);
    }
    out
}

fn render(d: &GroupDescription, lags: &[PartitionLag], window: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Group: {}\tState: {}\tProtocol: {}\tMembers: {}",
        d.group_id,
        d.state,
        protocol(d),
        d.members.len()
    );
    if let Some(c) = &d.consumer {
        let _ = writeln!(
            s,
            "Group protocol: consumer (KIP-848)\tGroup epoch: {}\tAssignment epoch: {}",
            c.group_epoch, c.assignment_epoch
        );
    }
    let shown = |a: &[(String, Vec<i32>)]| -> String {
        let listed: Vec<String> = a
            .iter()
            .map(|(t, ps)| {
                let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                format!("{t}:{}", ps.join(","))
            })
            .collect();
        if listed.is_empty() {
            "-".to_string()
        } else {
            listed.join(" ")
        }
    };
    if d.consumer.is_some() && !d.members.is_empty() {
        let _ = writeln!(
            s,
            "\nMEMBER\tINSTANCE\tCLIENT\tHOST\tEPOCH\tASSIGNMENT\tTARGET"
        );
        for m in &d.members {
            let (epoch, target) = m
                .consumer
                .as_ref()
                .map(|c| (c.member_epoch, shown(&c.target)))
                .unwrap_or((-1, "-".to_string()));
            let _ = writeln!(
                s,
                "{}\t{}\t{}\t{}\t{epoch}\t{}\t{target}",
                m.member_id,
                m.instance_id.as_deref().unwrap_or("-"),
                m.client_id,
                if m.client_host.is_empty() {
                    "-"
                } else {
                    &m.client_host
                },
                shown(&m.assignment),
            );
        }
    } else if !d.members.is_empty() {
        let _ = writeln!(s, "\nMEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNMENT");
        for m in &d.members {
            let assignment: Vec<String> = m
                .assignment
                .iter()
                .map(|(t, ps)| {
                    let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                    format!("{t}:{}", ps.join(","))
                })
                .collect();
            let host = if m.client_host.is_empty() {
                "-"
            } else {
                &m.client_host
            };
            let assignment = if assignment.is_empty() {
                "-".to_string()
            } else {
                assignment.join(" ")
            };
            let instance = m.instance_id.as_deref().unwrap_or("-");
            let _ = writeln!(
                s,
                "{}\t{instance}\t{}\t{host}\t{assignment}",
                m.member_id, m.client_id
            );
        }
    }
    let _ = writeln!(
        s,
        "\nTOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tTIME-LAG\tDRAIN-TIME\tCONSUMED/S\tTREND/S\tCOMMITS\tRETENTION-LEFT\tOWNER"
    );
    let dash = || "-".to_string();
    for l in lags {
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            l.topic,
            l.partition,
            if l.committed < 0 {
                dash()
            } else {
                l.committed.to_string()
            },
            l.log_end,
            l.lag,
            l.time_lag_ms
                .map_or_else(dash, |ms| format!("{:.1}", ms as f64 / 1000.0)),
            l.drain_time_seconds
                .map_or_else(dash, |v| format!("{v:.1}")),
            l.rates
                .consume_rate
                .map_or_else(dash, |v| format!("{v:.1}")),
            l.rates.trend.map_or_else(dash, |v| format!("{v:+.1}")),
            l.rates.commits,
            l.retention_left_ms.map_or_else(dash, human_ms),
            l.owner.as_deref().unwrap_or("-"),
        );
    }
    for w in lags.iter().flat_map(warnings) {
        let _ = writeln!(s, "warning: {w}");
    }
    for n in lags.iter().filter_map(|l| note(l, window)) {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The operator's two silent failures: a lag that keeps growing, and retention about
/// to delete (or already deleting) what the group has not read. Both rates-based
/// warnings need two commits seen; the deletion already done is a fact and needs none.
fn warnings(l: &PartitionLag) -> Vec<String> {
    let name = format!("{}-{}", l.topic, l.partition);
    let mut out = Vec::new();
    if l.lost {
        out.push(format!(
            "{name}: retention already deleted unread records ({} before the log start {})",
            l.committed, l.log_start
        ));
    }
    if l.lag == 0 || l.rates.commits < 2 {
        return out;
    }
    if let (true, Some(trend)) = (l.rates.growing, l.rates.trend) {
        out.push(format!(
            "{name}: lag is growing by {trend:.1} messages/s (at each of {} commits)",
            l.rates.commits
        ));
    }
    if let (Some(left), Some(drain)) = (l.retention_left_ms, l.drain_time_seconds) {
        if left <= 0 || drain * 1000.0 > left as f64 {
            out.push(format!(
                "{name}: retention will delete unread records in {} before the group catches up",
                human_ms(left.max(0))
            ));
        }
    }
    out
}

/// Why a lagging partition has no rates: the window saw fewer than two commits.
fn note(l: &PartitionLag, window: Duration) -> Option<String> {
    (l.lag > 0 && l.rates.commits < 2).then(|| {
        format!(
            "{}-{}: {} seen in {}; rates, drain time and warnings need two (a stopped group, or commits further apart: try a longer --window-ms)",
            l.topic,
            l.partition,
            crate::cli::count(l.rates.commits, "commit"),
            human_ms(i64::try_from(window.as_millis()).unwrap_or(i64::MAX)),
        )
    })
}

pub(super) fn human_ms(ms: i64) -> String {
    if ms <= 0 {
        return "now".to_string();
    }
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h{}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use tidelog_client::groups::CommitRates;

    use super::*;

    fn lag(
        lag: i64,
        commits: usize,
        growing: bool,
        drain: Option<f64>,
        left: Option<i64>,
    ) -> PartitionLag {
        let rated = commits >= 2;
        PartitionLag {
            topic: "t".into(),
            partition: 0,
            committed: 10,
            log_start: 0,
            log_end: 10 + lag,
            lag,
            time_lag_ms: Some(1_000),
            rates: CommitRates {
                commits,
                consume_rate: rated.then_some(1.0),
                trend: rated.then_some(if growing { 5.0 } else { -1.0 }),
                growing,
            },
            drain_time_seconds: drain,
            retention_left_ms: left,
            lost: false,
            owner: None,
        }
    }

    #[test]
    fn warnings_for_growing_lag_and_retention_overtaking() {
        assert!(warnings(&lag(0, 3, false, Some(0.0), None)).is_empty());
        assert_eq!(
            warnings(&lag(100, 3, true, Some(10.0), Some(3_600_000))),
            vec!["t-0: lag is growing by 5.0 messages/s (at each of 3 commits)"]
        );
        // Draining takes 2 h, retention strikes in 1 h.
        assert_eq!(
            warnings(&lag(100, 2, false, Some(7200.0), Some(3_600_000))),
            vec!["t-0: retention will delete unread records in 1h0m before the group catches up"]
        );
    }

    #[test]
    fn no_warning_from_fewer_than_two_commits() {
        // A stopped group (or one committing rarely): no rate, so nothing to warn from,
        // only a note saying so.
        let stopped = lag(5, 1, false, None, Some(60_000));
        assert!(warnings(&stopped).is_empty());
        let window = Duration::from_secs(15);
        assert_eq!(
            note(&stopped, window).as_deref(),
            Some("t-0: 1 commit seen in 15s; rates, drain time and warnings need two (a stopped group, or commits further apart: try a longer --window-ms)")
        );
        assert_eq!(note(&lag(0, 0, false, Some(0.0), None), window), None);
    }

    #[test]
    fn durations_read_like_an_operator_writes_them() {
        assert_eq!(human_ms(0), "now");
        assert_eq!(human_ms(59_000), "59s");
        assert_eq!(human_ms(61_000), "1m1s");
        assert_eq!(human_ms(7_260_000), "2h1m");
        assert_eq!(human_ms(604_800_000), "7d0h");
    }
}
