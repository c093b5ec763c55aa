//! CI check that the bench runs end to end: `targets --spawn --scale tiny` against a
//! spawned `tidelog serve` (and, for T10, a spawned three-node cluster), then the JSON
//! has one well-formed object per target; small runs of `rebalance` and `tls`; and a
//! tiny `compare` of two spawned tidelogs and an address where no broker listens.
//! Figures at tiny sizes mean nothing; only the shape is checked.

// Helpers outside #[test] fns: a failed unwrap there is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `TIDELOG_BIN`, else `target/<profile>/tidelog` beside the bench binary.
fn tidelog_binary(bench: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TIDELOG_BIN") {
        return Some(PathBuf::from(path));
    }
    let sibling = bench.parent()?.join("tidelog");
    sibling.is_file().then_some(sibling)
}

/// Runs `bench` with `args` against a spawned `tidelog` (working in `dir`), waiting at
/// most 120 s; its stdout, once it succeeded.
fn run_bench(bench: &Path, tidelog: &Path, dir: &Path, args: &[std::ffi::OsString]) -> String {
    let mut child = Command::new(bench)
        .args(args)
        .arg("--work-dir")
        .arg(dir)
        .arg("--tidelog-bin")
        .arg(tidelog)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("tidelog-bench {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        status.success(),
        "bench failed: {status}\n{stdout}\n{stderr}"
    );
    stdout
}

/// Runs `bench --spawn --quick-ceilings --json FILE ARGS...` and returns the JSON
/// figures; `None` (the test is skipped) without a tidelog binary.
fn spawned_figures(args: &[&str]) -> Option<Vec<serde_json::Value>> {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_tidelog-bench"));
    let Some(tidelog) = tidelog_binary(&bench) else {
        eprintln!("SKIPPED: no tidelog binary beside {}", bench.display());
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("figures.json");
    let mut all: Vec<std::ffi::OsString> = ["--spawn", "--quick-ceilings", "--json"]
        .iter()
        .map(Into::into)
        .collect();
    all.push(json.clone().into());
    all.extend(args.iter().map(Into::into));
    run_bench(&bench, &tidelog, dir.path(), &all);
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let serde_json::Value::Array(rows) = figures else {
        panic!("not a JSON array: {figures}");
    };
    Some(rows)
}

#[test]
fn tiny_targets_run_writes_every_target() {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_tidelog-bench"));
    let Some(tidelog) = tidelog_binary(&bench) else {
        eprintln!(
            "SKIPPED: no tidelog binary beside {} and TIDELOG_BIN unset; build it with `cargo build -p tidelog`",
            bench.display()
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("targets.json");
    let svg = dir.path().join("latency.svg");
    let mut args: Vec<std::ffi::OsString> = ["targets", "--spawn", "--scale", "tiny", "--json"]
        .iter()
        .map(Into::into)
        .collect();
    args.extend([json.clone().into(), "--svg".into(), svg.clone().into()]);
    let stdout = run_bench(&bench, &tidelog, dir.path(), &args);

    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = figures.as_array().expect("a JSON array");
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for expected in [
        "T1", "T2", "T3a", "T3b", "T4", "T5a", "T5b", "T6", "T7", "T8a", "T8b", "T8c", "T9a",
        "T9b", "T10",
    ] {
        assert!(ids.contains(&expected), "{expected} missing from {ids:?}");
    }
    for row in rows {
        for key in [
            "id", "workload", "value", "unit", "ceiling", "ratio", "target", "met",
        ] {
            assert!(row.get(key).is_some(), "{key} missing in {row}");
        }
        assert!(row["met"].is_boolean(), "{row}");
        assert!(!row["target"].as_str().unwrap().is_empty(), "{row}");
    }
    let by_id = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap();
    let t1 = by_id("T1");
    assert!(t1["value"].as_f64().unwrap() > 0.0, "{t1}");
    assert!(t1["ceiling"].as_f64().unwrap() > 0.0, "{t1}");
    let ratio = t1["ratio"].as_f64().unwrap();
    let expected = t1["value"].as_f64().unwrap() / t1["ceiling"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9, "{t1}");
    assert!(
        by_id("T8b")["met"].as_bool().unwrap(),
        "every partition took a write"
    );
    // T10 starts a real three-node cluster (under a second here) and its ceiling is
    // T1's figure from the same run.
    let t10 = by_id("T10");
    assert!(t10["value"].as_f64().unwrap() > 0.0, "{t10}");
    assert_eq!(t10["ceiling"], t1["value"], "{t10}");
    let ratio = t10["ratio"].as_f64().unwrap();
    let expected = t10["value"].as_f64().unwrap() / t1["value"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9, "{t10}");
    assert_eq!(t10["met"].as_bool().unwrap(), ratio >= 0.3, "{t10}");
    assert!(stdout.contains("T10"), "human table printed:\n{stdout}");

    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("<polyline"),
        "{plot}"
    );
}

/// A group of two absorbing a third, under each protocol: the eager rebalance takes
/// every partition from both members, the cooperative ones only the one that moves.
#[test]
fn a_small_rebalance_run_revokes_only_what_moves_except_when_eager() {
    let Some(rows) = spawned_figures(&[
        "rebalance",
        "--members",
        "2",
        "--partitions",
        "4",
        "--runs",
        "1",
        "--heartbeat-ms",
        "300",
        "--timeout-secs",
        "40",
    ]) else {
        return;
    };
    assert_eq!(rows.len(), 6, "two figures per protocol: {rows:?}");
    for row in &rows {
        assert_eq!(row["id"], "rebalance");
        let value = row["value"].as_f64().unwrap();
        assert!(value.is_finite() && value >= 0.0, "{row}");
    }
    let note = |protocol: &str| {
        rows.iter()
            .find(|r| r["workload"].as_str().unwrap().contains(protocol) && r["unit"] == "s")
            .map(|r| r["note"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(
        note("eager").contains("2 members revoked"),
        "{}",
        note("eager")
    );
    assert!(
        note("cooperative").contains("1 members revoked"),
        "{}",
        note("cooperative")
    );
    assert!(
        note("KIP-848").contains("1 members revoked"),
        "{}",
        note("KIP-848")
    );
}

/// A small `tls` run: produce and consume over the spawned broker's SSL listener and
/// its PLAINTEXT one; every TLS figure comes with its plaintext counterpart.
#[test]
fn a_small_tls_run_compares_tls_with_plaintext() {
    let Some(rows) =
        spawned_figures(&["tls", "--count", "2000", "--partitions", "1", "--runs", "1"])
    else {
        return;
    };
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "tls-produce",
            "tls-consume",
            "tls-produce-cpu",
            "tls-consume-cpu"
        ]
    );
    for row in &rows[..2] {
        for field in ["value", "ceiling", "ratio"] {
            let v = row[field].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite() && v > 0.0, "{field}: {row}");
        }
    }
}

/// `compare` against two spawned tidelogs under two names and one address where no
/// broker listens: every figure has a row, each live system a median, min, max and
/// two runs, the peer a ratio to the baseline; the dead one an error in its cells
/// and no number, without failing the run. The ceilings come along in the JSON.
#[test]
fn a_tiny_compare_run_has_every_row_for_every_system() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let Some(report) = spawned_report(&[
        "compare",
        "--spawn-tidelog",
        "--spawn-tidelog",
        "second",
        "--broker",
        &format!("dead={dead}"),
        "--scale",
        "tiny",
        "--runs",
        "2",
    ]) else {
        return;
    };
    let (json, stdout) = report;
    assert_eq!(json["baseline"], "tidelog");
    assert_eq!(
        json["order"][0],
        serde_json::json!(["tidelog", "second", "dead"])
    );
    assert_eq!(
        json["order"][1],
        serde_json::json!(["dead", "second", "tidelog"])
    );
    assert!(json["ceilings"]["loopback_tcp_mb_s"].as_f64().unwrap() > 0.0);
    let iperf3 = json["ceilings"]["iperf3"].as_str().unwrap();
    assert!(iperf3 == "ran" || iperf3 == "absent", "{iperf3}");
    let rows = json["rows"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "produce1",
            "produce16",
            "consume",
            "ack-p50",
            "ack-p99",
            "e2e-p50",
            "e2e-p99",
            "ping-p50",
            "ping-p99"
        ]
    );
    for row in rows {
        let cells = row["cells"].as_array().unwrap();
        let names: Vec<&str> = cells
            .iter()
            .map(|c| c["system"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["tidelog", "second", "dead"], "{row}");
        for cell in &cells[..2] {
            assert_eq!(cell["runs"].as_array().unwrap().len(), 2, "{row}");
            let (median, min, max) = (
                cell["median"].as_f64().unwrap(),
                cell["min"].as_f64().unwrap(),
                cell["max"].as_f64().unwrap(),
            );
            assert!(median > 0.0 && min <= median && median <= max, "{row}");
            assert!(cell["error"].is_null(), "{row}");
        }
        assert!(cells[0]["ratio"].is_null(), "{row}");
        let ratio = cells[1]["ratio"].as_f64().unwrap();
        let expected = cells[0]["median"].as_f64().unwrap() / cells[1]["median"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9, "{row}");
        assert!(cells[2]["median"].is_null(), "{row}");
        assert!(!cells[2]["error"].as_str().unwrap().is_empty(), "{row}");
    }
    assert!(stdout.contains("tidelog/system"), "{stdout}");
    assert!(stdout.contains("ping-p99"), "{stdout}");
}

/// Runs `bench --quick-ceilings --json FILE ARGS...` (the command spawns its own
/// brokers) and returns the JSON object and stdout; `None` without a tidelog binary.
fn spawned_report(args: &[&str]) -> Option<(serde_json::Value, String)> {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_tidelog-bench"));
    let Some(tidelog) = tidelog_binary(&bench) else {
        eprintln!("SKIPPED: no tidelog binary beside {}", bench.display());
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let mut all: Vec<std::ffi::OsString> = vec!["--quick-ceilings".into(), "--json".into()];
    all.push(json.clone().into());
    all.extend(args.iter().map(Into::into));
    let stdout = run_bench(&bench, &tidelog, dir.path(), &all);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    Some((report, stdout))
}
