//! `tidelog plan --bootstrap` against a real `tidelog serve`: the plan is built from what
//! the cluster is observed doing, not from the seed's assumptions.

// Helpers outside #[test] fns: a failed expect here is the test failing.
#![allow(clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_client::{Client, NewTopic, SimpleLog};

const VALUE_BYTES: usize = 300;

/// A `tidelog serve` on free loopback ports; killed when dropped.
struct Server {
    kafka: SocketAddr,
    child: Child,
    _data: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let data = tempfile::tempdir().expect("temp dir");
        let kafka = free_addr();
        let admin = free_addr();
        let child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
            .arg("serve")
            .arg("--listen")
            .arg(kafka.to_string())
            .arg("--admin-listen")
            .arg(admin.to_string())
            .arg("--data-dir")
            .arg(data.path().join("data"))
            .env("TIDELOG_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn tidelog serve");
        let mut server = Server {
            kafka,
            child,
            _data: data,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready(admin) {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("tidelog serve exited during start-up: {status}");
            }
            assert!(Instant::now() < deadline, "tidelog serve not ready in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local addr")
}

fn ready(admin: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&admin, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream
        .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn create_topic(bootstrap: &str, name: &str, retention_ms: &str) {
    runtime().block_on(async {
        let mut client = Client::connect_to(bootstrap).await.expect("connect");
        client
            .create_topic(&NewTopic {
                name: name.to_owned(),
                partitions: 2,
                replication_factor: 1,
                configs: vec![("retention.ms".to_owned(), retention_ms.to_owned())],
            })
            .await
            .expect("create topic");
    });
}

/// Runs `tidelog plan` with `args`, killing it after 60 s.
fn plan(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .arg("plan")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tidelog plan");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("poll tidelog plan").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tidelog plan {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}

#[test]
fn plans_from_the_observed_cluster() {
    let server = Server::start();
    let bootstrap = server.kafka.to_string();
    create_topic(&bootstrap, "events", "3600000");

    // Keyless records of a known size, produced until the plan has finished watching.
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicU64::new(0));
    let producer = {
        let (stop, produced, bootstrap) = (stop.clone(), produced.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            runtime().block_on(async {
                let mut log = SimpleLog::connect(&bootstrap).await.expect("connect");
                let value = Bytes::from(vec![b'v'; VALUE_BYTES]);
                while !stop.load(Ordering::Relaxed) {
                    log.produce("events", None, value.clone())
                        .await
                        .expect("produce");
                    produced.fetch_add(1, Ordering::Relaxed);
                }
            });
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while produced.load(Ordering::Relaxed) < 20 {
        assert!(
            Instant::now() < deadline,
            "producer made no progress in 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let output = plan(&["--bootstrap", &bootstrap, "--sample", "2s", "--json"]);
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer thread");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "plan --bootstrap failed: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");

    let topics = json["observed"]["topics"]
        .as_array()
        .expect("observed topics");
    let events = topics
        .iter()
        .find(|topic| topic["name"] == "events")
        .expect("the events topic was observed");
    let appended = events["produced"].as_u64().expect("a count");
    assert!(appended > 0, "{events}");
    assert!(appended <= produced.load(Ordering::Relaxed), "{events}");
    assert_eq!(events["partitions"], 2);

    let assumed = &json["assumptions"];
    assert_eq!(assumed["message_bytes"], VALUE_BYTES as f64);
    assert_eq!(assumed["replication_factor"], 1);
    assert_eq!(assumed["retention_seconds"], 3_600.0);
    let window = json["observed"]["window_seconds"].as_f64().expect("window");
    assert!(window >= 2.0, "window {window}");
    let rate = assumed["rate"].as_f64().expect("rate");
    assert_eq!(rate, (appended as f64 / window).ceil());

    // The plan is computed from those observations: storage = rate x size x retention x RF.
    let stored = json["figures"]["stored_bytes"].as_f64().expect("stored");
    let expected = rate * VALUE_BYTES as f64 * 3_600.0;
    assert!(
        (stored - expected).abs() <= expected * 1e-12,
        "{stored} != {expected}"
    );
    assert_eq!(json["figures"]["brokers"], 1);
}

#[test]
fn an_idle_cluster_is_refused_not_planned_as_zero() {
    let server = Server::start();
    let bootstrap = server.kafka.to_string();
    create_topic(&bootstrap, "quiet", "86400000");
    let output = plan(&["--bootstrap", &bootstrap, "--sample", "500ms"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("no records were appended"), "{stderr}");
}
