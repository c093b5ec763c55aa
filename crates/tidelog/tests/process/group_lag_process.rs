//! `tidelog group describe` against a real `tidelog serve`: rates are measured between
//! the commits seen in the window (a consumer that commits every 5 s and keeps up is not
//! "growing"), nothing is warned from fewer than two commits, and the two lag figures in
//! seconds carry their own names: time lag (age of the oldest unread record) and drain
//! time (lag / consumed rate).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::cli_run::{create_topic, tidelog};
use support::Node;
use tidelog_client::{Client, OffsetSpec, ProduceRecord, Producer, ProducerConfig};

/// The cells of `topic`-0's row in describe's partition table, by column name.
fn row(out: &str, topic: &str) -> std::collections::HashMap<String, String> {
    let lines: Vec<&str> = out.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("TOPIC\t"))
        .unwrap_or_else(|| panic!("no partition table in:\n{out}"));
    let names: Vec<&str> = lines[header].split('\t').collect();
    let cells = lines[header + 1..]
        .iter()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|c| c[0] == topic && c[1] == "0")
        .unwrap_or_else(|| panic!("no row for {topic}-0 in:\n{out}"));
    names
        .iter()
        .zip(cells)
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect()
}

async fn produce(producer: &mut Producer, topic: &str, n: usize, timestamp: Option<i64>) {
    for i in 0..n {
        let mut record = ProduceRecord::new(None, Some(Bytes::from(format!("v{i}"))));
        record.timestamp = timestamp;
        producer.send(topic, Some(0), record).await.unwrap();
    }
    producer.flush().await.unwrap();
}

/// Commits group steady-readers' offset at the log end of steady-0.
async fn commit_log_end(c: &mut Client) {
    let end = c
        .list_offsets("steady", 0, OffsetSpec::Latest)
        .await
        .unwrap();
    c.commit_offsets("steady-readers", &[("steady".into(), 0, end)])
        .await
        .unwrap();
}

async fn producer(node: &Node) -> Producer {
    let client = Client::connect_to(&node.kafka.to_string()).await.unwrap();
    Producer::new(client, ProducerConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_committing_every_5s_that_keeps_up_is_not_reported_growing() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    create_topic(&bootstrap, "steady", 1);
    let mut writer = producer(&node).await;
    let mut committer = Client::connect_to(&bootstrap).await.unwrap();
    produce(&mut writer, "steady", 10, None).await;
    commit_log_end(&mut committer).await;

    // 100 records/s produced; the "consumer" commits the log end every 5 s, as an
    // auto-committing consumer that keeps up does.
    let load = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut next_commit = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            produce(&mut writer, "steady", 10, None).await;
            if Instant::now() >= next_commit {
                commit_log_end(&mut committer).await;
                next_commit += Duration::from_secs(5);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let b = bootstrap.clone();
    // The default window.
    let out = tokio::task::spawn_blocking(move || {
        tidelog(&b, &["group", "describe", "steady-readers"], b"")
    })
    .await
    .unwrap();
    load.abort();
    assert!(out.ok, "{}", out.stderr);
    assert!(!out.stdout.contains("warning:"), "{}", out.stdout);
    let r = row(&out.stdout, "steady");
    let commits: usize = r["COMMITS"].parse().unwrap();
    assert!(commits >= 2, "{}", out.stdout);
    let rate: f64 = r["CONSUMED/S"].parse().unwrap();
    assert!((30.0..300.0).contains(&rate), "{}", out.stdout);
    let drain: f64 = r["DRAIN-TIME"].parse().unwrap();
    assert!(drain < 15.0, "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_group_shows_its_time_lag_and_no_warning_without_two_commits() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    let created = tidelog(
        &bootstrap,
        &[
            "topic",
            "create",
            "stalled",
            "--partitions",
            "1",
            "--config",
            "retention.ms=3600000",
        ],
        b"",
    );
    assert!(created.ok, "{}", created.stderr);
    let mut writer = producer(&node).await;
    let half_hour_ago = support_now_ms() - 1_800_000;
    produce(&mut writer, "stalled", 10, Some(half_hour_ago)).await;
    writer
        .client()
        .commit_offsets("stalled-readers", &[("stalled".into(), 0, 2)])
        .await
        .unwrap();

    let out = tokio::task::spawn_blocking({
        let b = bootstrap.clone();
        move || {
            tidelog(
                &b,
                &[
                    "group",
                    "describe",
                    "stalled-readers",
                    "--window-ms",
                    "2000",
                ],
                b"",
            )
        }
    })
    .await
    .unwrap();
    assert!(out.ok, "{}", out.stderr);
    // Retention strikes in about 30 min and nobody consumes, but with no commit seen
    // there is no rate to compare it with: a note says so, no warning guesses.
    assert!(!out.stdout.contains("warning:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("note: stalled-0: 0 commits seen in 2s"),
        "{}",
        out.stdout
    );
    let r = row(&out.stdout, "stalled");
    let time_lag: f64 = r["TIME-LAG"].parse().unwrap();
    assert!((1_790.0..1_900.0).contains(&time_lag), "{}", out.stdout);
    assert_eq!((r["LAG"].as_str(), r["DRAIN-TIME"].as_str()), ("8", "-"));

    let json = tokio::task::spawn_blocking({
        let b = bootstrap.clone();
        move || {
            tidelog(
                &b,
                &[
                    "group",
                    "describe",
                    "stalled-readers",
                    "--window-ms",
                    "500",
                    "--output",
                    "json",
                ],
                b"",
            )
        }
    })
    .await
    .unwrap();
    assert!(json.ok, "{}", json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let p = &v["partitions"][0];
    assert_eq!(
        (p["topic"].as_str(), p["lag_messages"].as_i64()),
        (Some("stalled"), Some(8))
    );
    assert!(p["drain_time_seconds"].is_null(), "{p}");
    let time_lag = p["time_lag_seconds"].as_f64().unwrap();
    assert!((1_790.0..1_900.0).contains(&time_lag), "{p}");
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(0), "{v}");
}

fn support_now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// The sampling window reports its progress on stderr when that is a terminal (run
/// under `script`, which gives the command a pseudo-terminal), and stays silent in a pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sampling_window_shows_progress_only_on_a_terminal() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    create_topic(&bootstrap, "watched", 1);
    let mut writer = producer(&node).await;
    produce(&mut writer, "watched", 3, None).await;
    writer
        .client()
        .commit_offsets("watchers", &[("watched".into(), 0, 1)])
        .await
        .unwrap();

    let b = bootstrap.clone();
    let piped = tokio::task::spawn_blocking(move || {
        tidelog(
            &b,
            &["group", "describe", "watchers", "--window-ms", "1500"],
            b"",
        )
    })
    .await
    .unwrap();
    assert!(piped.ok, "{}", piped.stderr);
    assert!(!piped.stderr.contains("watching"), "{}", piped.stderr);

    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped the terminal half: no script(1)");
        return;
    }
    let command = format!(
        "{} group describe watchers --window-ms 1500 --bootstrap {bootstrap}",
        env!("CARGO_BIN_EXE_tidelog")
    );
    let on_terminal = tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("describe under script did not finish in 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(on_terminal.status.success(), "{text}");
    assert!(
        text.contains("watching commits of watchers: 1s of 2s"),
        "{text}"
    );
    assert!(text.contains("TOPIC\tPARTITION"), "{text}");
}
