//! What operators expect from the CLI itself, against a real `tidelog serve`: every
//! list/describe command answers `--output json` with a document that parses, a
//! bootstrap given as `localhost:PORT` works like an IP, and completions and the man
//! page are generated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::cli_run::tidelog;
use support::Node;

fn json(bootstrap: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--output", "json"]);
    let out = tidelog(bootstrap, &all, b"");
    assert!(out.ok, "tidelog {all:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("tidelog {all:?} printed no JSON ({e}):\n{}", out.stdout))
}

#[test]
fn list_and_describe_commands_print_json_over_a_localhost_bootstrap() {
    let node = Node::start(&[]);
    let bootstrap = format!("localhost:{}", node.kafka.port());
    let run = |args: &[&str]| {
        let out = tidelog(&bootstrap, args, b"");
        assert!(out.ok, "tidelog {args:?}: {}", out.stderr);
    };
    run(&["topic", "create", "shown", "--partitions", "2"]);
    run(&[
        "group",
        "reset-offsets",
        "shown-readers",
        "--topic",
        "shown",
        "--to-earliest",
    ]);

    let topics = json(&bootstrap, &["topic", "list"]);
    let shown = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shown")
        .expect("shown in topic list");
    assert_eq!(shown["partitions"], 2);

    let topic = json(&bootstrap, &["topic", "describe", "shown"]);
    assert_eq!(topic["partitions"].as_array().map(Vec::len), Some(2));
    assert_eq!(topic["partitions"][0]["latest_offset"], 0);
    assert!(topic["configs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "retention.ms"));

    let groups = json(&bootstrap, &["group", "list"]);
    assert!(groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["group"] == "shown-readers"));
    let group = json(
        &bootstrap,
        &["group", "describe", "shown-readers", "--window-ms", "300"],
    );
    assert_eq!(group["partitions"].as_array().map(Vec::len), Some(2));
    assert_eq!(group["partitions"][0]["lag_messages"], 0);

    let cluster = json(&bootstrap, &["cluster", "info"]);
    assert_eq!(cluster["brokers"].as_array().map(Vec::len), Some(1));
    assert_eq!(cluster["brokers"][0]["state"], "unfenced");
    assert!(cluster["partitions"]["total"].as_u64().unwrap() >= 2);

    let moves = json(&bootstrap, &["partition", "list-reassignments"]);
    assert_eq!(moves["reassignments"].as_array().map(Vec::len), Some(0));
}

/// Runs `tidelog <args>` (no broker involved); its stdout.
fn offline(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tidelog {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_and_the_man_page_are_generated() {
    for (shell, marker) in [
        ("bash", "_tidelog()"),
        ("zsh", "#compdef tidelog"),
        ("fish", "complete -c tidelog"),
    ] {
        let script = offline(&["completion", shell]);
        assert!(script.contains(marker), "{shell}:\n{script}");
        assert!(
            script.contains("reset-offsets"),
            "{shell} lacks subcommands"
        );
    }
    let man = offline(&["man"]);
    assert!(man.contains(".TH tidelog 1"), "{man}");
    assert!(man.contains("serve"), "{man}");
}
