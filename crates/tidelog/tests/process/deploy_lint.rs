//! Lints deploy/: the systemd unit passes `systemd-analyze verify` (where systemd-analyze
//! exists), the alert rules pass promtool's check and unit tests (where promtool
//! exists), the YAML files parse (where Python's yaml module exists), the Grafana
//! dashboard is JSON, the compose file runs the README's three-node flags, the image
//! runs as non-root with the data dir as a volume, and every metric the dashboard and
//! the alert rules name is documented in docs/operations.md. Docker is not assumed:
//! the image and compose file are checked, not built.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `tidelog_*` names in a text, with a histogram's sample suffixes folded away.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("tidelog_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let preceded_by_word = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !preceded_by_word {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            names.insert(base.to_string());
        }
        rest = &tail[end..];
    }
    names
}

fn assert_documented(file: &str, names: &BTreeSet<String>) {
    let docs = read("docs/operations.md");
    assert!(!names.is_empty(), "{file} names no metric");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !docs.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "{file} uses metrics not in docs/operations.md: {missing:?}"
    );
}

#[test]
fn dashboard_is_json_over_documented_metrics() {
    let text = read("deploy/grafana/tidelog-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = String::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push_str(target["expr"].as_str().unwrap());
            exprs.push('\n');
        }
    }
    assert_documented("the dashboard", &metric_names(&exprs));
}

#[test]
fn alert_rules_use_documented_metrics() {
    for file in [
        "deploy/prometheus/tidelog-rules.yml",
        "deploy/prometheus/tidelog-rules.test.yml",
    ] {
        assert_documented(file, &metric_names(&read(file)));
    }
}

/// `promtool check rules` and the rules' own unit tests (`promtool test rules`), where
/// promtool exists (scripts/test installs Debian's prometheus package for it).
#[test]
fn alert_rules_pass_promtool() {
    let dir = repo().join("deploy/prometheus");
    for args in [
        ["check", "rules", "tidelog-rules.yml"],
        ["test", "rules", "tidelog-rules.test.yml"],
    ] {
        let Ok(out) = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
        else {
            eprintln!("skipped: no promtool (Debian's prometheus package)");
            return;
        };
        assert!(
            out.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn yaml_files_parse() {
    let files = [
        "deploy/prometheus/tidelog-rules.yml",
        "deploy/prometheus/tidelog-rules.test.yml",
        "deploy/docker/compose.yaml",
    ];
    let check = "import sys, yaml\nfor f in sys.argv[1:]:\n    yaml.safe_load(open(f))\n";
    let has_yaml = Command::new("python3")
        .args(["-c", "import yaml"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_yaml {
        eprintln!("skipped: no python3 with the yaml module to parse {files:?}");
        return;
    }
    let out = Command::new("python3")
        .args(["-c", check])
        .args(files.iter().map(|f| repo().join(f)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn systemd_unit_verifies() {
    let unit = read("deploy/systemd/tidelog.service");
    for hardening in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "User=tidelog",
    ] {
        assert!(unit.contains(hardening), "the unit lacks {hardening}");
    }
    // verify checks that ExecStart's binary exists: point it at the one just built.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tidelog.service");
    let local = unit.replace("/usr/local/bin/tidelog", env!("CARGO_BIN_EXE_tidelog"));
    std::fs::write(&path, local).unwrap();
    let Ok(out) = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
    else {
        eprintln!("skipped: no systemd-analyze");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
}

#[test]
fn image_runs_as_non_root_with_a_data_volume() {
    let dockerfile = read("deploy/docker/Dockerfile");
    assert!(dockerfile.contains("cargo build --release --locked -p tidelog"));
    assert!(dockerfile.contains("USER 65532:65532"));
    assert!(dockerfile.contains("VOLUME [\"/var/lib/tidelog\"]"));
}

#[test]
fn compose_runs_the_readme_three_node_flags() {
    let readme = read("README.md");
    let compose = read("deploy/docker/compose.yaml");
    let quorum = "1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093";
    assert!(
        readme.contains(&format!("Q={quorum}")),
        "README's block changed"
    );
    for flag in [
        "--node-id",
        "--listen",
        "--controller-listen",
        "--admin-listen",
        "--data-dir",
        "--quorum",
    ] {
        assert!(readme.contains(flag), "README's block lacks {flag}");
    }
    for i in 1..=3 {
        let service = format!("tidelog-{i}:");
        let start = compose
            .find(&service)
            .unwrap_or_else(|| panic!("no {service}"));
        let block = &compose[start..];
        let block = &block[..block[1..].find("tidelog-").map_or(block.len(), |e| e + 1)];
        for (flag, value) in [
            ("--node-id", i.to_string()),
            ("--listen", format!("127.0.0.1:{i}9092")),
            ("--controller-listen", format!("127.0.0.1:{i}9093")),
            ("--admin-listen", format!("127.0.0.1:{i}9644")),
            ("--quorum", quorum.to_string()),
        ] {
            assert!(
                block.contains(&format!("\"{flag}\", \"{value}\"")),
                "node {i} lacks {flag} {value}:\n{block}"
            );
        }
    }
}

#[test]
fn metric_names_are_read_out_of_expressions() {
    let names = metric_names(
        "histogram_quantile(0.99, rate(tidelog_log_flush_seconds_bucket[5m])) / my_tidelog_x + tidelog_up",
    );
    let expected: BTreeSet<String> = ["tidelog_log_flush_seconds", "tidelog_up"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, expected);
}
