//! A three-node cluster of real processes as an operator runs it: the README's block
//! pasted as written, a clean stop of the controller leader, and what the nodes say
//! about themselves when brokers stop and the quorum is lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::cli_run::tidelog;
use support::cluster::Cluster;
use support::{http_get, http_status};
use tidelog_client::{Client, ClientConfig, NewTopic};

const START: Duration = Duration::from_secs(60);

fn block_on<F: Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(90), f).await })
        .expect("client call timed out")
}

/// The controller quorum's leader as node `via` reports it.
fn quorum_leader(cluster: &Cluster, via: i32) -> i32 {
    let addr = cluster.node(via).kafka.to_string();
    block_on(async move {
        let mut client = Client::connect_to(&addr).await.unwrap();
        client.describe_quorum().await.unwrap().leader_id
    })
}

#[test]
fn a_clean_stop_of_the_controller_leader_hands_over_and_admin_calls_go_on() {
    let mut cluster = Cluster::start(3, &[], START);
    let leader = quorum_leader(&cluster, 1);
    assert!((1..=3).contains(&leader), "leader {leader}");
    // A leader votes for the voter it hands over to only once its own election is
    // older than the leader lease (2 s).
    std::thread::sleep(Duration::from_millis(2500));
    let survivor = (1..=3).find(|id| *id != leader).unwrap();
    assert!(cluster.stop(leader, Duration::from_secs(30)), "clean exit");
    // At once and without a single retry: the other voters lead already.
    let addr = cluster.node(survivor).kafka.to_string();
    let after = block_on(async move {
        let mut config = ClientConfig::new(&addr)?;
        config.api_timeout = Duration::ZERO;
        let mut client = Client::connect(config).await?;
        client
            .create_topic(&NewTopic {
                name: "after-stop".into(),
                partitions: 2,
                replication_factor: 2,
                configs: vec![],
            })
            .await?;
        client.describe_quorum().await
    });
    let quorum = after.expect("an admin call right after the controller leader stopped");
    assert!(
        quorum.leader_id != leader && (1..=3).contains(&quorum.leader_id),
        "leader {} after {leader} stopped",
        quorum.leader_id
    );
    // The CLI, started while the old leader is still stopping, retries what fails
    // meanwhile and succeeds.
    cluster.restart(leader, START);
    let leader = quorum_leader(&cluster, survivor);
    std::thread::sleep(Duration::from_millis(2500));
    let survivor = (1..=3).find(|id| *id != leader).unwrap();
    let bootstrap = cluster.node(survivor).kafka.to_string();
    let out = std::thread::scope(|scope| {
        let cli = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            tidelog(
                &bootstrap,
                &[
                    "topic",
                    "create",
                    "during-stop",
                    "--partitions",
                    "1",
                    "--replication-factor",
                    "2",
                ],
                b"",
            )
        });
        assert!(cluster.stop(leader, Duration::from_secs(30)), "clean exit");
        cli.join().unwrap()
    });
    assert!(out.ok, "{}", out.stderr);
}

/// The README's three-node block, pasted as written: the same commands on other ports
/// (node `i`'s `i9092`, `i9093`, `i9644` become free ports) and this build's binary.
#[test]
fn the_readme_three_node_block_works_pasted_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme
        .find("## Three-node cluster")
        .expect("README has a three-node section");
    let section = &readme[start..];
    let body_start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let body_len = section[body_start..].find("```").expect("block end");
    let block = &section[body_start..body_start + body_len];
    let base = free_port_base();
    let mut script = String::new();
    for line in block.lines() {
        if line.starts_with("cargo build") {
            continue; // the test's own build is the binary
        }
        script.push_str(line);
        script.push('\n');
    }
    for i in 1..=3u16 {
        for (suffix, k) in [("9092", 2u16), ("9093", 3), ("9644", 4)] {
            let port = (base + i * 10 + k).to_string();
            script = script.replace(&format!("{i}{suffix}"), &port);
            script = script.replace(
                &format!("${{i}}{suffix}"),
                &format!("$(({base} + i * 10 + {k}))"),
            );
        }
    }
    script = script.replace("target/release/tidelog", env!("CARGO_BIN_EXE_tidelog"));
    // Stop at the first failing command, as a person would notice it; then stop the
    // nodes as the README says.
    script.insert_str(0, "set -e\n");
    script.push_str("kill %1 %2 %3\nwait\n");
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("TIDELOG_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = child.id();
    let deadline = Instant::now() + Duration::from_secs(150);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever happened, nothing the block started outlives the test.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let logs: String = (1..=3)
        .map(|i| std::fs::read_to_string(dir.path().join(format!("n{i}.log"))).unwrap_or_default())
        .collect();
    let status =
        status.unwrap_or_else(|| panic!("the block did not finish\n{stdout}\n{stderr}\n{logs}"));
    assert!(status.success(), "{script}\n{stdout}\n{stderr}\n{logs}");
    assert_eq!(
        stdout.lines().filter(|l| *l == "ready").count(),
        3,
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("created topic orders"),
        "{stdout}\n{stderr}"
    );
    // describe: three partitions, each on all three brokers.
    let on_three = stdout
        .lines()
        .filter(|l| {
            let fields: Vec<&str> = l.split('\t').collect();
            fields.len() >= 4
                && fields[0].parse::<i32>().is_ok()
                && fields[2].split(',').count() == 3
        })
        .count();
    assert_eq!(on_three, 3, "{stdout}\n{stderr}");
}

/// A base for nine ports `base + i * 10 + k` (i in 1..=3, k in 2..=4), all free now,
/// below the ephemeral range.
fn free_port_base() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    for attempt in 0..1000u32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        let base = 20_000 + (h.finish() % 1_200) as u16 * 10;
        let all_free = (1..=3u16).all(|i| {
            (2..=4u16)
                .all(|k| std::net::TcpListener::bind(("127.0.0.1", base + i * 10 + k)).is_ok())
        });
        if all_free {
            return base;
        }
    }
    panic!("no free ports");
}

#[test]
fn stopped_brokers_and_a_lost_quorum_are_told_truthfully() {
    let mut cluster = Cluster::start(3, &[], START);
    let leader = quorum_leader(&cluster, 1);
    let others: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let bootstrap = cluster.node(leader).kafka.to_string();
    // One partition led by each broker and replicated nowhere else: the broker stopped
    // below cannot hand its leadership over.
    let created = tidelog(
        &bootstrap,
        &[
            "topic",
            "create",
            "solo",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
        ],
        b"",
    );
    assert!(created.ok, "{}", created.stderr);
    // And one on every broker, whose ISRs lose the stopped broker.
    let shared = tidelog(
        &bootstrap,
        &[
            "topic",
            "create",
            "shared",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
        b"",
    );
    assert!(shared.ok, "{}", shared.stderr);
    wait_until_isrs_full(&bootstrap, "shared", 3);

    // A broker stopped cleanly is listed fenced at once, not a session later.
    let stopped = others[0];
    assert!(cluster.stop(stopped, Duration::from_secs(30)), "clean exit");
    // The controller took it out of every ISR of "shared": the leaders count that.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shrinks: f64 = [leader, others[1]]
            .iter()
            .map(|id| metric(cluster.node(*id).admin, "tidelog_isr_shrinks_total"))
            .sum();
        if shrinks >= 3.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{shrinks} ISR shrinks counted after the controller removed broker {stopped} from 3 ISRs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let info = tidelog(&bootstrap, &["cluster", "info"], b"");
    assert!(info.ok, "{}", info.stderr);
    let line = info
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Brokers:"))
        .find(|l| l.trim_start().starts_with(&format!("{stopped}\t")))
        .unwrap_or_else(|| panic!("broker {stopped} not listed:\n{}", info.stdout));
    assert!(line.contains("\tfenced"), "{}", info.stdout);

    // The last other voter dies: the leader is left alone, without a majority.
    cluster.kill9(others[1]);
    let admin = cluster.node(leader).admin;
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_status(admin, "/readyz") != Some(503) {
        assert!(
            Instant::now() < deadline,
            "/readyz still ready 20 s after the quorum was lost"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _, body) = http_get(admin, "/v1/cluster");
    assert_eq!(status, 503, "{body}");
    let info = tidelog(
        &bootstrap,
        &["cluster", "info", "--api-timeout-ms", "3000"],
        b"",
    );
    let quorum_line = info
        .stdout
        .lines()
        .find(|l| l.starts_with("Controller quorum:"))
        .unwrap_or_else(|| panic!("{}\n{}", info.stdout, info.stderr));
    assert!(
        !quorum_line.contains(&format!("leader {leader}")),
        "names the old leader: {}",
        info.stdout
    );
    // A majority back: ready again.
    cluster.restart(stopped, START);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(admin, "/readyz") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "not ready 30 s after a majority came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of an unlabelled metric on a node's /metrics (0 when absent).
fn metric(admin: std::net::SocketAddr, name: &str) -> f64 {
    let (_, _, body) = http_get(admin, "/metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Waits (bounded) until every partition of `topic` has `size` in-sync replicas.
fn wait_until_isrs_full(bootstrap: &str, topic: &str, size: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = tidelog(bootstrap, &["topic", "describe", topic], b"");
        let full = out.ok
            && out
                .stdout
                .lines()
                .filter(|l| {
                    l.split('\t')
                        .next()
                        .is_some_and(|w| w.parse::<i32>().is_ok())
                })
                .all(|l| {
                    l.split('\t')
                        .nth(3)
                        .is_some_and(|isr| isr.split(',').count() == size)
                });
        if full {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "ISRs of {topic} not full: {}",
            out.stdout
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
