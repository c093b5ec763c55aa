//! What an operator meets first, against real `tidelog serve` processes: settings from
//! the environment and where a bad value came from, and CLI arguments as their help
//! text writes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::cli_run::tidelog;
use support::{http_get, http_status, Node};

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// `tidelog serve` on free ports and a temp directory with extra arguments and
/// environment variables; stderr is piped.
fn serve(args: &[&str], env: &[(&str, &str)], dir: &std::path::Path) -> (Child, SocketAddr) {
    let admin = free_addr();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidelog"));
    cmd.arg("serve");
    if !args.contains(&"--listen") {
        cmd.args(["--listen", &free_addr().to_string()]);
    }
    cmd.args(["--admin-listen", &admin.to_string()])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(args)
        .env("TIDELOG_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd.spawn().unwrap(), admin)
}

/// Waits (bounded) for a start-up that must fail; its stderr.
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = serve(args, env, dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tidelog serve {args:?} {env:?} did not refuse to start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[test]
fn only_setting_names_are_read_from_the_environment() {
    // The README documents TIDELOG_TEST_TIMEOUT for the test script: it is no setting,
    // and a node started with it in its environment runs.
    let dir = tempfile::tempdir().unwrap();
    let (mut child, admin) = serve(
        &[],
        &[("TIDELOG_TEST_TIMEOUT", "300"), ("TIDELOG_BENCH_MB", "8")],
        dir.path(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            panic!("tidelog serve exited ({status}): {stderr}");
        }
        if http_status(admin, "/readyz") == Some(200) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "tidelog serve not ready within 30 s");
}

#[test]
fn configuration_errors_name_where_the_value_came_from() {
    let env = refused(&[], &[("TIDELOG_NUM_PARTITIONS", "many")]);
    assert!(
        env.contains("environment variable TIDELOG_NUM_PARTITIONS") && env.contains("many"),
        "{env}"
    );
    let set = refused(&["--set", "num.partition=2"], &[]);
    assert!(
        set.contains("unknown setting `num.partition` from --set"),
        "{set}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(&file, "\"log.retention.ms\" = \"a week\"\n").unwrap();
    let from_file = refused(&["--config", file.to_str().unwrap()], &[]);
    assert!(
        from_file.contains(&format!("in config file {}", file.display())),
        "{from_file}"
    );
    // A process flag read from its environment variable says so too.
    let node_id = refused(&[], &[("TIDELOG_NODE_ID", "one")]);
    assert!(
        node_id.contains("environment variable TIDELOG_NODE_ID"),
        "{node_id}"
    );
}

#[test]
fn a_listener_on_every_interface_needs_an_advertised_address() {
    let port = free_addr().port().to_string();
    let any = format!("0.0.0.0:{port}");
    let out = refused(&["--listen", &any], &[]);
    assert!(out.contains("advertised.listeners"), "{out}");
    // With one, the node starts and advertises it.
    let dir = tempfile::tempdir().unwrap();
    let advertised = format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}");
    let (mut child, admin) = serve(&["--listen", &any, "--set", &advertised], &[], dir.path());
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(admin, "/readyz") != Some(200) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("tidelog serve exited: {status}");
        }
        assert!(Instant::now() < deadline, "not ready within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = tidelog(&format!("127.0.0.1:{port}"), &["cluster", "info"], b"");
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("0.0.0.0"), "{}", out.stdout);
}

#[test]
fn a_quorum_has_one_three_or_five_voters() {
    for n in [2u16, 4] {
        let voters: Vec<String> = (1..=n)
            .map(|i| format!("{i}@127.0.0.1:{}", free_addr().port()))
            .collect();
        let quorum = voters.join(",");
        let out = refused(&["--node-id", "1", "--quorum", &quorum], &[]);
        assert!(out.contains("1, 3 or 5"), "{n} voters: {out}");
    }
}

#[test]
fn reset_offsets_takes_an_age_as_its_help_says() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    let created = tidelog(
        &bootstrap,
        &["topic", "create", "ages", "--partitions", "1"],
        b"",
    );
    assert!(created.ok, "{}", created.stderr);
    let produced = tidelog(&bootstrap, &["produce", "ages"], b"a\nb\nc\n");
    assert!(produced.ok, "{}", produced.stderr);
    // Every record is younger than 15 minutes: the reset lands on the first one.
    let out = tidelog(
        &bootstrap,
        &[
            "group",
            "reset-offsets",
            "g",
            "--topic",
            "ages",
            "--to-time",
            "-15m",
            "--dry-run",
        ],
        b"",
    );
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("ages\t0\t-\t0"), "{}", out.stdout);
    // A time in the future: nothing that old or newer, so the log end.
    let out = tidelog(
        &bootstrap,
        &[
            "group",
            "reset-offsets",
            "g",
            "--topic",
            "ages",
            "--to-time",
            "2999-01-01T00:00:00Z",
            "--dry-run",
        ],
        b"",
    );
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("ages\t0\t-\t3"), "{}", out.stdout);
}

#[test]
fn request_errors_are_counted_for_every_api() {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    let args = ["topic", "create", "twice", "--partitions", "1"];
    assert!(tidelog(&bootstrap, &args, b"").ok);
    let again = tidelog(&bootstrap, &args, b"");
    assert!(
        !again.ok && again.stderr.contains("TOPIC_ALREADY_EXISTS"),
        "{}",
        again.stderr
    );
    let missing = tidelog(&bootstrap, &["topic", "delete", "never-made"], b"");
    assert!(!missing.ok);
    let (_, _, metrics) = http_get(node.admin, "/metrics");
    for line in [
        "tidelog_request_errors_total{api=\"CreateTopics\",error=\"TOPIC_ALREADY_EXISTS\"} 1",
        "tidelog_request_errors_total{api=\"DeleteTopics\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in\n{metrics}"
        );
    }
}
