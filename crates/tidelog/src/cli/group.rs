//! `tidelog group`: list, describe (members, assignment, lag), reset offsets, delete.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use tidelog_client::groups::{GroupDescription, PartitionLag};
use tidelog_client::{Client, OffsetSpec};

use super::when::{now_ms, parse_time};
use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct GroupArgs {
    #[command(subcommand)]
    command: GroupCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum GroupCommand {
    /// List groups with their state.
    List,
    /// Members, assignments, and per partition: committed offset, log end, lag in
    /// messages and seconds, its trend, and the time left before retention deletes
    /// unread records.
    Describe {
        /// Group id.
        group: String,
        /// How long to watch offsets move to measure rates and the lag trend.
        #[arg(long, default_value_t = 1000)]
        window_ms: u64,
    },
    /// Move a group's committed offsets for one topic (refused while it has members).
    ResetOffsets {
        /// Group id.
        group: String,
        /// The topic whose partitions are reset.
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Print the new offsets without committing them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete a group without members and its committed offsets.
    Delete {
        /// Group id.
        group: String,
    },
}

#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct ResetTarget {
    /// The log start of each partition.
    #[arg(long)]
    to_earliest: bool,
    /// The log end of each partition (skip everything unread).
    #[arg(long)]
    to_latest: bool,
    /// This offset in every partition (clamped to what the log holds).
    #[arg(long, value_name = "OFFSET")]
    to_offset: Option<i64>,
    /// The first record at or after this time: ms since the epoch, RFC 3339, or an age like -15m.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_to_time)]
    to_time: Option<i64>,
}

/// `--to-time` as ms since the epoch; an age (`-15m`) counts back from now.
fn parse_to_time(s: &str) -> Result<i64, String> {
    parse_time(s, now_ms())
}

pub(crate) fn run(args: GroupArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            GroupCommand::List => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "GROUP\tSTATE\tTYPE")?;
                for g in client.list_groups().await? {
                    let kind = if g.protocol_type.is_empty() {
                        "-"
                    } else {
                        &g.protocol_type
                    };
                    writeln!(out, "{}\t{}\t{}", g.group_id, g.state, kind)?;
                }
            }
            GroupCommand::Describe { group, window_ms } => {
                describe(&mut client, &group, Duration::from_millis(window_ms)).await?;
            }
            GroupCommand::ResetOffsets {
                group,
                topic,
                to,
                dry_run,
            } => reset(&mut client, &group, &topic, &to, dry_run).await?,
            GroupCommand::Delete { group } => {
                client.delete_group(&group).await?;
                println!("deleted group {group}");
            }
        }
        Ok(())
    })
}

async fn describe(client: &mut Client, group: &str, window: Duration) -> anyhow::Result<()> {
    let description = client.describe_group(group).await?;
    let lags = client.group_lag(group, window).await?;
    if description.state == "Dead" && lags.is_empty() {
        bail!("group {group} does not exist");
    }
    print!("{}", render(&description, &lags));
    Ok(())
}

fn render(d: &GroupDescription, lags: &[PartitionLag]) -> String {
    let mut s = String::new();
    let protocol = match (d.protocol_type.as_str(), d.protocol.as_str()) {
        ("", _) => "-".to_string(),
        (t, "") => t.to_string(),
        (t, p) => format!("{t}/{p}"),
    };
    let _ = writeln!(
        s,
        "Group: {}\tState: {}\tProtocol: {}\tMembers: {}",
        d.group_id,
        d.state,
        protocol,
        d.members.len()
    );
    if !d.members.is_empty() {
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
            let _ = writeln!(
                s,
                "{}\t{}\t{}\t{}\t{}",
                m.member_id,
                m.instance_id.as_deref().unwrap_or("-"),
                m.client_id,
                if m.client_host.is_empty() {
                    "-"
                } else {
                    &m.client_host
                },
                if assignment.is_empty() {
                    "-".to_string()
                } else {
                    assignment.join(" ")
                }
            );
        }
    }
    let _ = writeln!(
        s,
        "\nTOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tLAG-SECONDS\tCONSUMED/S\tTREND/S\tRETENTION-LEFT\tOWNER"
    );
    let mut warnings = Vec::new();
    for l in lags {
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{:+.1}\t{}\t{}",
            l.topic,
            l.partition,
            if l.committed < 0 {
                "-".to_string()
            } else {
                l.committed.to_string()
            },
            l.log_end,
            l.lag,
            l.lag_seconds.map_or("-".to_string(), |v| format!("{v:.1}")),
            l.consume_rate,
            l.trend,
            l.retention_left_ms.map_or("-".to_string(), human_ms),
            l.owner.as_deref().unwrap_or("-"),
        );
        warnings.extend(warning(l));
    }
    for w in warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// The operator's two silent failures: a lag that keeps growing, and retention about
/// to delete (or already deleting) what the group has not read.
fn warning(l: &PartitionLag) -> Vec<String> {
    let name = format!("{}-{}", l.topic, l.partition);
    let mut out = Vec::new();
    if l.lost {
        out.push(format!(
            "{name}: retention already deleted unread records ({} before the log start {})",
            l.committed, l.log_start
        ));
    }
    if l.lag > 0 && l.trend > 0.0 {
        out.push(format!(
            "{name}: lag is growing by {:.1} messages/s",
            l.trend
        ));
    }
    if let Some(left) = l.retention_left_ms {
        let drain_ms = l.lag_seconds.map(|s| s * 1000.0);
        let overtaken = left <= 0 || drain_ms.is_none_or(|d| d > left as f64);
        if l.lag > 0 && overtaken {
            out.push(format!(
                "{name}: retention will delete unread records in {} before the group catches up",
                human_ms(left.max(0))
            ));
        }
    }
    out
}

fn human_ms(ms: i64) -> String {
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

async fn reset(
    client: &mut Client,
    group: &str,
    topic: &str,
    to: &ResetTarget,
    dry_run: bool,
) -> anyhow::Result<()> {
    let d = client.describe_group(group).await?;
    if !d.members.is_empty() {
        bail!(
            "group {group} has {} active members; stop its consumers before resetting offsets",
            d.members.len()
        );
    }
    let to_time = to.to_time;
    let partitions = client.partition_count(topic, false).await?;
    let committed = client.committed_offsets(group).await?;
    let mut plan = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "TOPIC\tPARTITION\tOLD\tNEW")?;
    for p in 0..partitions {
        let earliest = client.list_offsets(topic, p, OffsetSpec::Earliest).await?;
        let latest = client.list_offsets(topic, p, OffsetSpec::Latest).await?;
        let target = if to.to_earliest {
            earliest
        } else if to.to_latest {
            latest
        } else if let Some(n) = to.to_offset {
            n.clamp(earliest, latest)
        } else if let Some(ms) = to_time {
            match client
                .list_offsets(topic, p, OffsetSpec::Timestamp(ms))
                .await?
            {
                -1 => latest,
                found => found,
            }
        } else {
            bail!("give one of --to-earliest, --to-latest, --to-offset, --to-time");
        };
        let old = committed
            .get(&(topic.to_string(), p))
            .map_or("-".to_string(), i64::to_string);
        writeln!(out, "{topic}\t{p}\t{old}\t{target}")?;
        plan.push((topic.to_string(), p, target));
    }
    if dry_run {
        writeln!(out, "(dry run: nothing committed)")?;
    } else {
        client.commit_offsets(group, &plan).await?;
        writeln!(out, "committed {} offsets for group {group}", plan.len())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(lag: i64, trend: f64, lag_seconds: Option<f64>, left: Option<i64>) -> PartitionLag {
        PartitionLag {
            topic: "t".into(),
            partition: 0,
            committed: 10,
            log_start: 0,
            log_end: 10 + lag,
            lag,
            consume_rate: 1.0,
            trend,
            lag_seconds,
            retention_left_ms: left,
            lost: false,
            owner: None,
        }
    }

    #[test]
    fn warnings_for_growing_lag_and_retention_overtaking() {
        assert!(warning(&lag(0, 0.0, Some(0.0), None)).is_empty());
        assert_eq!(
            warning(&lag(100, 5.0, Some(10.0), Some(3_600_000))),
            vec!["t-0: lag is growing by 5.0 messages/s"]
        );
        // Draining takes 2 h, retention strikes in 1 h.
        let w = warning(&lag(100, -1.0, Some(7200.0), Some(3_600_000)));
        assert_eq!(
            w,
            vec!["t-0: retention will delete unread records in 1h0m before the group catches up"]
        );
        // Not consuming at all: retention wins whatever the headroom.
        assert_eq!(warning(&lag(5, 0.0, None, Some(86_400_000 * 3))).len(), 1);
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
