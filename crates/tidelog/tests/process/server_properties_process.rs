//! A Kafka 4 `server.properties` starts `tidelog serve`: the single-node KRaft file as
//! Kafka ships it (ports and directory changed), Kafka's synonyms and thread settings,
//! and the settings tidelog cannot honour stopping start-up with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::cli_run::{create_topic, tidelog};
use support::http_status;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The settings of Kafka 4's `config/server.properties` (a combined broker and
/// controller of one node), on the given ports and directory.
fn kafka_single_node_file(kafka: u16, controller: u16, dir: &Path) -> String {
    format!(
        "# Server basics\n\
         process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.bootstrap.servers=localhost:{controller}\n\
         \n\
         # Socket server settings\n\
         listeners=PLAINTEXT://:{kafka},CONTROLLER://:{controller}\n\
         inter.broker.listener.name=PLAINTEXT\n\
         advertised.listeners=PLAINTEXT://localhost:{kafka},CONTROLLER://localhost:{controller}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n\
         num.network.threads=3\n\
         num.io.threads=8\n\
         socket.send.buffer.bytes=102400\n\
         socket.receive.buffer.bytes=102400\n\
         socket.request.max.bytes=104857600\n\
         \n\
         # Log basics\n\
         log.dirs={}\n\
         num.partitions=1\n\
         num.recovery.threads.per.data.dir=1\n\
         \n\
         # Internal topic settings\n\
         offsets.topic.replication.factor=1\n\
         share.coordinator.state.topic.replication.factor=1\n\
         share.coordinator.state.topic.min.isr=1\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         \n\
         # Log retention policy\n\
         log.retention.hours=168\n\
         log.segment.bytes=1073741824\n\
         log.retention.check.interval.ms=300000\n",
        dir.join("kraft-combined-logs").display()
    )
}

/// `tidelog serve --config FILE` with only the admin port given as a flag.
fn serve_file(file: &Path, extra: &[&str]) -> (Child, SocketAddr) {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(["serve", "--admin-listen", &admin.to_string(), "--config"])
        .arg(file)
        .args(extra)
        .env("TIDELOG_LOG", "warn")
        .env_remove("TIDELOG_LISTEN")
        .env_remove("TIDELOG_DATA_DIR")
        .env_remove("TIDELOG_NODE_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, admin)
}

fn wait_ready(child: &mut Child, admin: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(admin, "/readyz") != Some(200) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("tidelog serve exited {status}: {err}");
        }
        assert!(Instant::now() < deadline, "not ready within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the child; what it printed (its log, then its errors).
fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    out
}

/// Waits (bounded) for a start-up that must fail; its stderr.
fn refused(file: &Path) -> String {
    let (mut child, _) = serve_file(file, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success());
            return stop(child);
        }
        if Instant::now() > deadline {
            stop(child);
            panic!(
                "tidelog serve --config {} did not refuse to start",
                file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn kafkas_single_node_server_properties_starts_a_working_node() {
    let dir = tempfile::tempdir().unwrap();
    let (kafka, controller) = (free_port(), free_port());
    let file = dir.path().join("server.properties");
    std::fs::write(&file, kafka_single_node_file(kafka, controller, dir.path())).unwrap();
    let (mut child, admin) = serve_file(&file, &[]);
    wait_ready(&mut child, admin);
    let bootstrap = format!("localhost:{kafka}");
    create_topic(&bootstrap, "t", 1);
    let described = tidelog(&bootstrap, &["topic", "describe", "t"], b"");
    assert!(described.ok, "{}", described.stderr);
    // log.retention.hours=168 is read as Kafka reads it: 604800000 ms.
    assert!(
        described.stdout.contains("604800000"),
        "{}",
        described.stdout
    );
    let info = tidelog(&bootstrap, &["cluster", "info"], b"");
    assert!(
        info.stdout.contains(&format!("localhost:{kafka}")),
        "{}",
        info.stdout
    );
    // log.dirs is the data directory.
    assert!(dir.path().join("kraft-combined-logs").is_dir());
    let err = stop(child);
    // Each setting without effect gets one warning that says why.
    for name in [
        "num.io.threads",
        "num.network.threads",
        "socket.send.buffer.bytes",
    ] {
        assert_eq!(
            err.matches(&format!("setting {name} ")).count(),
            1,
            "{name}: {err}"
        );
    }
    assert!(err.contains("thread pools"), "{err}");
}

#[test]
fn synonyms_follow_kafkas_precedence_and_flags_win_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let kafka = free_port();
    let file = dir.path().join("broker.properties");
    // ms wins over minutes over hours, whatever their order in the file.
    std::fs::write(
        &file,
        format!(
            "log.retention.ms=7200000\nlog.retention.hours=1\nlog.retention.minutes=30\n\
             listeners=PLAINTEXT://127.0.0.1:{kafka}\nlog.dir={}\nnode.id=7\n",
            dir.path().join("from-file").display()
        ),
    )
    .unwrap();
    let flag_dir = dir.path().join("from-flag");
    let (mut child, admin) = serve_file(&file, &["--data-dir", flag_dir.to_str().unwrap()]);
    wait_ready(&mut child, admin);
    let bootstrap = format!("127.0.0.1:{kafka}");
    create_topic(&bootstrap, "t", 1);
    let described = tidelog(&bootstrap, &["topic", "describe", "t"], b"");
    assert!(described.stdout.contains("7200000"), "{}", described.stdout);
    let info = tidelog(&bootstrap, &["cluster", "info"], b"");
    assert!(
        info.stdout.contains('7'),
        "node.id from the file: {}",
        info.stdout
    );
    stop(child);
    assert!(flag_dir.is_dir() && !dir.path().join("from-file").exists());
}

#[test]
fn what_tidelog_cannot_honour_stops_start_up_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    for (line, expected) in [
        (
            "zookeeper.connect=localhost:2181",
            "ZooKeeper mode was removed",
        ),
        ("remote.log.storage.system.enable=true", "tiered storage"),
        ("authorizer.class.name=com.example.MyAuthorizer", "plug-in"),
        (
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "removed in Kafka 4.0",
        ),
        ("log.dirs=/a,/b,/b", "lists /b twice"),
        ("log.segment.bytes=1", "log.segment.bytes"),
        ("num.partitions=0", "at least 1"),
        ("log.cleanup.policy=bogus", "log.cleanup.policy"),
        ("log.retention.ms=-2", "log.retention.ms"),
        ("num.partitionz=3", "unknown setting `num.partitionz`"),
        (
            "controller.quorum.bootstrap.servers=a:9093,b:9093",
            "controller.quorum.voters",
        ),
    ] {
        std::fs::write(&file, format!("# a comment\n{line}\n")).unwrap();
        let err = refused(&file);
        assert!(err.contains(expected), "{line}: {err}");
        // Every refusal names the file and the line.
        if !line.starts_with("log.dirs") && !line.starts_with("controller.quorum") {
            assert!(
                err.contains(&format!("{}:2", file.display())),
                "{line}: {err}"
            );
        }
    }
}
