//! `tidelog plan` as an operator runs it: the built binary, its JSON and its text.

// Helpers outside #[test] fns: a failed expect here is the test failing.
#![allow(clippy::expect_used)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with `args`, killing it if it has not finished in 30 s.
fn tidelog(args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tidelog");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll tidelog") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tidelog {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    (status.success(), stdout, stderr)
}

fn plan_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--json"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = tidelog(&all);
    assert!(ok, "tidelog {all:?} failed: {stderr}");
    serde_json::from_str(&stdout).expect("plan --json prints one JSON object")
}

#[test]
fn json_defaults_are_the_seeds_figures() {
    let plan = plan_json(&[]);
    let figures = &plan["figures"];
    assert_eq!(figures["stored_bytes"], 1_814_400_000_000_000u64);
    assert_eq!(figures["cluster_bytes_per_sec"], 8_000_000_000u64);
    assert_eq!(figures["brokers_needed"], 107);
    assert_eq!(figures["brokers"], 128);
    assert_eq!(figures["nic_fraction"], 0.5);
    assert_eq!(figures["consumers"], 12_000);
    assert_eq!(figures["partitions"], 16_384);
    assert_eq!(figures["file_handles_per_broker"], 1_152);
    assert_eq!(figures["messages_truncated"], 234_240);
    assert_eq!(figures["dedup_bytes"], 960_000_000);
    let duplicates = figures["duplicates_per_sec"].as_f64().expect("a number");
    assert!(
        (duplicates - 5_000_000.0 / 86_400.0).abs() < 1e-9,
        "{duplicates}"
    );
    assert_eq!(plan["binding_resource"]["resource"], "network");
}

#[test]
fn flags_change_the_plan() {
    let plan = plan_json(&["--nic-gbps", "10", "--retention", "36h", "--headroom", "5%"]);
    let figures = &plan["figures"];
    assert_eq!(figures["brokers_needed"], 11);
    assert_eq!(figures["brokers"], 16);
    assert_eq!(figures["retained_bytes"], 129_600_000_000_000u64);
    assert_eq!(figures["drain_seconds"], 600);
    assert_eq!(figures["consumers"], 10_500);
}

#[test]
fn text_shows_formulas_and_the_binding_resource() {
    let (ok, stdout, stderr) = tidelog(&["plan"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("8,000,000,000 / 75,000,000"), "{stdout}");
    assert!(
        stdout.contains("=  1,814,400,000,000,000  (1.81 PB)"),
        "{stdout}"
    );
    assert!(stdout.contains("Binding resource: network."), "{stdout}");
}

#[test]
fn bad_assumptions_are_refused() {
    let (ok, _, stderr) = tidelog(&["plan", "--rate", "0"]);
    assert!(!ok);
    assert!(stderr.contains("--rate"), "{stderr}");
    let (ok, _, stderr) = tidelog(&["plan", "--retention", "7 fortnights"]);
    assert!(!ok);
    assert!(stderr.contains("unknown duration unit"), "{stderr}");
}
