//! The `topic`, `produce` and `consume` commands against a real `tidelog serve` process.
// Test harness helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::cli_run::{tidelog, COMMAND_TIMEOUT};

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// A `tidelog serve` child on ephemeral ports with a temp data dir; killed on drop.
struct Server {
    child: Child,
    kafka: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let kafka = free_addr();
        let admin = free_addr();
        let child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
            .args(["serve", "--listen", &kafka.to_string()])
            .args(["--admin-listen", &admin.to_string()])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("TIDELOG_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            kafka,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(kafka).is_err() {
            assert!(
                Instant::now() < deadline,
                "tidelog serve did not listen on {kafka}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn bootstrap(&self) -> String {
        self.kafka.to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok(bootstrap: &str, args: &[&str], stdin: &[u8]) -> String {
    let out = tidelog(bootstrap, args, stdin);
    assert!(out.ok, "tidelog {args:?} failed: {}", out.stderr);
    out.stdout
}

#[test]
fn topic_produce_consume_round_trip() {
    let server = Server::start();
    let b = server.bootstrap();
    assert!(ok(&b, &["topic", "create", "orders", "--partitions", "3"], b"").contains("orders"));
    assert!(ok(&b, &["topic", "list"], b"").contains("orders\t3 partitions"));

    // 1000 keyed lines; --verbose reports where each landed.
    let input: String = (0..1000)
        .map(|i| format!("key-{}:value-{i}\n", i % 37))
        .collect();
    let positions = ok(
        &b,
        &[
            "produce",
            "orders",
            "--key-separator",
            ":",
            "--verbose",
            "--batch-lines",
            "100",
        ],
        input.as_bytes(),
    );
    let positions: Vec<(i32, i64)> = positions
        .lines()
        .map(|l| {
            // `partition P offset O`: labelled, for people.
            let words: Vec<&str> = l.split(' ').collect();
            assert_eq!((words[0], words[2]), ("partition", "offset"), "{l}");
            (words[1].parse().unwrap(), words[3].parse().unwrap())
        })
        .collect();
    assert_eq!(positions.len(), 1000);
    let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    let mut expected = BTreeSet::new();
    for (i, &(p, o)) in positions.iter().enumerate() {
        let key = format!("key-{}", i % 37);
        assert_eq!(
            Some(p),
            tidelog_client::partition_for_key(key.as_bytes(), 3)
        );
        per_partition.entry(p).or_default().push(o);
        expected.insert(format!("{p} {o} {key} value-{i}"));
    }
    for offsets in per_partition.values() {
        // Per-partition offsets are dense from 0, in send order.
        assert_eq!(*offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
    }

    let consumed = ok(
        &b,
        &[
            "consume",
            "orders",
            "--from-beginning",
            "--count",
            "1000",
            "--format",
            "%p %o %k %v",
            "--timeout-ms",
            "20000",
        ],
        b"",
    );
    let got: BTreeSet<String> = consumed.lines().map(str::to_owned).collect();
    assert_eq!(consumed.lines().count(), 1000);
    assert_eq!(got, expected);

    // One partition from an offset, with a count.
    let part0 = ok(
        &b,
        &[
            "consume",
            "orders",
            "--partition",
            "0",
            "--offset",
            "1",
            "--count",
            "2",
            "--format",
            "%o",
        ],
        b"",
    );
    assert_eq!(part0, "1\n2\n");

    // Idle timeout ends a follow with success and nothing printed.
    let idle = ok(&b, &["consume", "orders", "--timeout-ms", "300"], b"");
    assert_eq!(idle, "");

    let described = ok(&b, &["topic", "describe", "orders"], b"");
    let latest_total: i64 = described
        .lines()
        .filter(|l| l.split('\t').count() == 6 && !l.starts_with("Partition"))
        .map(|l| l.split('\t').nth(5).unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(latest_total, 1000, "{described}");

    ok(
        &b,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "retention.ms=123456",
        ],
        b"",
    );
    assert!(ok(&b, &["topic", "describe", "orders"], b"").contains("* retention.ms=123456"));
    ok(
        &b,
        &[
            "topic",
            "alter-config",
            "orders",
            "--delete",
            "retention.ms",
        ],
        b"",
    );
    assert!(!ok(&b, &["topic", "describe", "orders"], b"").contains("* retention.ms"));

    let bad = tidelog(
        &b,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "no.such.config=1",
        ],
        b"",
    );
    assert!(!bad.ok);
    assert!(bad.stderr.contains("no.such.config"), "{}", bad.stderr);

    ok(&b, &["topic", "delete", "orders"], b"");
    assert!(!ok(&b, &["topic", "list"], b"").contains("orders"));
    let gone = tidelog(&b, &["consume", "orders", "--count", "1"], b"");
    assert!(!gone.ok);
    assert!(
        gone.stderr.contains("unknown topic orders"),
        "{}",
        gone.stderr
    );
}

#[test]
fn compressed_and_keyless_records_round_trip() {
    let server = Server::start();
    let b = server.bootstrap();
    ok(&b, &["topic", "create", "logs", "--partitions", "2"], b"");
    let mut expected = Vec::new();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let input: String = (0..50).map(|i| format!("{codec}-{i}\n")).collect();
        expected.extend(input.lines().map(str::to_owned));
        ok(
            &b,
            &["produce", "logs", "--compression", codec],
            input.as_bytes(),
        );
    }
    let consumed = ok(
        &b,
        &[
            "consume",
            "logs",
            "--from-beginning",
            "--count",
            "250",
            "--timeout-ms",
            "20000",
        ],
        b"",
    );
    let mut got: Vec<String> = consumed.lines().map(str::to_owned).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);

    // Start positions by time: an hour ago covers everything, the future covers nothing.
    let recent = ok(
        &b,
        &[
            "consume",
            "logs",
            "--from-time",
            "-1h",
            "--count",
            "250",
            "--timeout-ms",
            "20000",
        ],
        b"",
    );
    assert_eq!(recent.lines().count(), 250);
    let future = ok(
        &b,
        &[
            "consume",
            "logs",
            "--from-time",
            "2999-01-01T00:00:00Z",
            "--timeout-ms",
            "300",
        ],
        b"",
    );
    assert_eq!(future, "");
}

#[test]
fn broker_config_sets_describes_and_deletes_dynamic_configs() {
    let server = Server::start();
    let b = server.bootstrap();
    let broker_config = |args: &[&str]| tidelog(&b, &[&["broker-config"], args].concat(), b"");
    let must = |args: &[&str]| {
        let out = broker_config(args);
        assert!(out.ok, "broker-config {args:?} failed: {}", out.stderr);
        out.stdout
    };
    let line = |text: &str, name: &str| -> String {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}=")))
            .unwrap_or_default()
            .to_string()
    };
    must(&[
        "alter",
        "--broker-defaults",
        "--set",
        "log.retention.ms=60000",
    ]);
    assert_eq!(
        must(&["describe", "--broker-defaults"]).trim(),
        "log.retention.ms=60000\tDYNAMIC_DEFAULT_BROKER_CONFIG\tdynamic"
    );
    must(&["alter", "--broker", "1", "--set", "log.retention.ms=30000"]);
    let mine = must(&["describe", "--broker", "1"]);
    assert_eq!(
        line(&mine, "log.retention.ms"),
        "log.retention.ms=30000\tDYNAMIC_BROKER_CONFIG\tdynamic"
    );
    assert_eq!(
        line(&mine, "num.partitions"),
        "num.partitions=1\tDEFAULT_CONFIG\tread-only"
    );
    let refused = broker_config(&["alter", "--broker", "1", "--set", "num.partitions=3"]);
    assert!(!refused.ok);
    assert!(
        refused
            .stderr
            .contains("Cannot update these configs dynamically: Set(num.partitions)"),
        "{}",
        refused.stderr
    );
    must(&["alter", "--broker", "1", "--delete", "log.retention.ms"]);
    assert_eq!(
        line(&must(&["describe", "--broker", "1"]), "log.retention.ms"),
        "log.retention.ms=60000\tDYNAMIC_DEFAULT_BROKER_CONFIG\tdynamic"
    );
    assert!(!broker_config(&["describe"]).ok, "a target is required");
    let nothing = broker_config(&["alter", "--broker", "1"]);
    assert!(
        nothing.stderr.contains("nothing to change"),
        "{}",
        nothing.stderr
    );
}

#[test]
fn unreachable_broker_is_a_clear_error() {
    // A port free on 127.0.0.2: the other tests of this binary, running meanwhile, pick
    // their servers' ports on 127.0.0.1, so none can start listening on this address
    // between the pick and the CLI's connect (a free 127.0.0.1 port once was taken).
    let addr = TcpListener::bind("127.0.0.2:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let started = Instant::now();
    let out = tidelog(&addr, &["topic", "list", "--api-timeout-ms", "1500"], b"");
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!("cannot connect to {addr}")),
        "{}",
        out.stderr
    );
    // It retried (saying so once) for about the time it was given, then said so.
    assert!(
        out.stderr.contains("still failing after retrying"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("waiting for the cluster").count(),
        1,
        "{}",
        out.stderr
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async { tokio::time::timeout(COMMAND_TIMEOUT, f).await })
        .expect("client test timed out")
}

#[test]
fn client_library_round_trips_headers_timestamps_and_offsets() {
    use bytes::Bytes;
    use tidelog_client::{
        Client, NewTopic, OffsetSpec, ProduceRecord, Producer, ProducerConfig, SimpleLog,
    };

    let server = Server::start();
    let b = server.bootstrap();
    block_on(async {
        let mut client = Client::connect_to(&b).await.unwrap();
        client
            .create_topic(&NewTopic {
                name: "events".into(),
                partitions: 1,
                replication_factor: 1,
                configs: vec![("retention.ms".into(), "3600000".into())],
            })
            .await
            .unwrap();
        let base_ts = 1_790_000_000_000_i64;
        let mut producer = Producer::new(client, ProducerConfig::default());
        for i in 0..20_i64 {
            let record = ProduceRecord {
                key: Some(Bytes::from(format!("k{i}"))),
                value: (i != 7).then(|| Bytes::from(vec![i as u8; i as usize])),
                headers: vec![("trace".into(), Some(Bytes::from(format!("t{i}"))))],
                timestamp: Some(base_ts + i * 1000),
            };
            producer.send("events", Some(0), record).await.unwrap();
        }
        let written = producer.flush().await.unwrap();
        assert_eq!(
            written
                .iter()
                .map(|m| (m.partition, m.offset))
                .collect::<Vec<_>>(),
            (0..20).map(|o| (0, o)).collect::<Vec<_>>()
        );

        let client = producer.client();
        let fetched = client
            .fetch("events", 0, 5, &Default::default())
            .await
            .unwrap();
        assert_eq!(fetched.high_watermark, 20);
        assert_eq!(fetched.next_offset, 20);
        assert_eq!(fetched.records.len(), 15);
        for r in &fetched.records {
            let i = r.offset;
            assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
            let expected_value = (i != 7).then(|| vec![i as u8; i as usize]);
            assert_eq!(r.value.as_deref().map(<[u8]>::to_vec), expected_value);
            assert_eq!(r.timestamp, base_ts + i * 1000);
            assert_eq!(
                r.headers,
                vec![("trace".to_owned(), Some(Bytes::from(format!("t{i}"))))]
            );
        }

        assert_eq!(
            client
                .list_offsets("events", 0, OffsetSpec::Earliest)
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            client
                .list_offsets("events", 0, OffsetSpec::Latest)
                .await
                .unwrap(),
            20
        );
        let by_time = OffsetSpec::Timestamp(base_ts + 12_500);
        assert_eq!(client.list_offsets("events", 0, by_time).await.unwrap(), 13);

        client.create_partitions("events", 3).await.unwrap();
        client.invalidate_topic("events");
        assert_eq!(
            client
                .topic("events", false)
                .await
                .unwrap()
                .partition_count(),
            3
        );
        let configs = client.describe_topic_configs("events").await.unwrap();
        let retention = configs.iter().find(|c| c.name == "retention.ms").unwrap();
        assert_eq!(retention.value.as_deref(), Some("3600000"));
        assert!(retention.is_topic_override());

        // The seed's three calls.
        let mut log = SimpleLog::connect(&b).await.unwrap();
        let (partition, offset) = log
            .produce(
                "simple",
                Some(Bytes::from_static(b"key")),
                Bytes::from_static(b"hello"),
            )
            .await
            .unwrap();
        let records = log.fetch("simple", partition, offset).await.unwrap();
        assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
        assert_eq!(records[0].offset, offset);
        // Until consumer groups exist the broker may lack FindCoordinator/OffsetCommit or
        // answer with an error code; a transport or decoding failure is a bug either way.
        match log.commit("group-1", "simple", partition, offset + 1).await {
            Ok(()) => {}
            Err(e @ tidelog_client::ClientError::UnsupportedApi { .. }) => {
                eprintln!("commit not available yet: {e}")
            }
            Err(e) => assert!(e.response_error().is_some(), "commit failed: {e}"),
        }
    });
}
