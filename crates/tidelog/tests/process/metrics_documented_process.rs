//! Every metric a running broker exposes is documented: after produce, fetch, group and
//! error traffic (so the labelled families have series), each name on `/metrics` — as
//! scraped, with Prometheus's `_total` / `_info` sample names — appears in
//! docs/operations.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;

use support::cli_run::tidelog;
use support::{http_get, Node};

/// The names an operator queries: a counter's `_total`, an info's `_info`, a
/// histogram's base name (its `_bucket` / `_sum` / `_count` follow from it).
fn documented_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = rest.split(' ');
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        names.insert(match kind {
            "counter" => format!("{name}_total"),
            "info" => format!("{name}_info"),
            _ => name.to_string(),
        });
    }
    names
}

/// Sample names (without labels), with a histogram's suffixes folded into its name.
fn sample_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|n| {
            ["_bucket", "_sum", "_count", "_created"]
                .iter()
                .find_map(|s| n.strip_suffix(s))
                .unwrap_or(n)
                .to_string()
        })
        .collect()
}

#[test]
fn every_metric_on_a_running_broker_is_in_operations_md() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    let run = |args: &[&str], stdin: &[u8]| {
        let out = tidelog(&bootstrap, args, stdin);
        assert!(out.ok, "tidelog {args:?}: {}", out.stderr);
        out
    };
    run(&["topic", "create", "documented", "--partitions", "2"], b"");
    run(&["produce", "documented"], b"a\nb\nc\nd\n");
    run(
        &["consume", "documented", "--from-beginning", "--count", "4"],
        b"",
    );
    // A group with committed offsets, so the per-group families have series.
    run(
        &[
            "group",
            "reset-offsets",
            "documented-readers",
            "--topic",
            "documented",
            "--to-earliest",
        ],
        b"",
    );
    // An error answered, so tidelog_request_errors_total has one.
    assert!(!tidelog(&bootstrap, &["topic", "describe", "no-such-topic"], b"").ok);

    let (status, _, body) = http_get(node.admin, "/metrics");
    assert_eq!(status, 200);
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .unwrap();
    let announced = documented_names(&body);
    for needed in [
        "tidelog_requests_total",
        "tidelog_request_errors_total",
        "tidelog_topic_bytes_out_total",
        "tidelog_group_committed_offset",
        "tidelog_partition_log_end_offset",
    ] {
        assert!(
            announced.contains(needed),
            "{needed} not on /metrics:\n{body}"
        );
    }
    let samples = sample_names(&body);
    let undocumented: Vec<&String> = announced
        .iter()
        .chain(samples.iter())
        .filter(|name| !docs.contains(&format!("`{name}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "on /metrics but not in docs/operations.md: {undocumented:?}"
    );
}
