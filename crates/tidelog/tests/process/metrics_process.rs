//! Process tests of the admin port's metrics and JSON views: a real `tidelog serve`,
//! real Kafka requests, then `/metrics` and `/v1/*` read over HTTP and checked against
//! exactly what was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::{http_get, Conn, Node};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One batch of `count` records, all stamped `timestamp`.
fn batch(count: usize, timestamp: i64) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("value-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

async fn create_topic(conn: &mut Conn, name: &str) {
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(resp.topics[0].error_code, 0);
}

async fn produce(conn: &mut Conn, topic: &str, partition: i32, records: Bytes) -> i16 {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let resp: ProduceResponse = conn.call(ApiKey::Produce, 9, &req).await;
    resp.responses[0].partition_responses[0].error_code
}

/// Fetches everything from offset 0; returns the record bytes received.
async fn fetch_all(conn: &mut Conn, topic: &str) -> usize {
    let req = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(16 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(8 << 20)])]);
    let resp: FetchResponse = conn.call(ApiKey::Fetch, 11, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.records.as_ref().map_or(0, |r| r.len())
}

/// Parses the text exposition strictly: every line is `# HELP|TYPE|UNIT ...`, the
/// final `# EOF`, or `name{label="value",...} value`. Returns series -> value, the
/// series spelled as in the text.
fn parse_exposition(text: &str) -> Result<HashMap<String, f64>, String> {
    let mut series = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    if lines.last() != Some(&"# EOF") {
        return Err("last line is not # EOF".into());
    }
    for line in &lines[..lines.len() - 1] {
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split(' ').next().unwrap_or("");
            if !matches!(kind, "HELP" | "TYPE" | "UNIT") {
                return Err(format!("bad comment: {line}"));
            }
            continue;
        }
        let name_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .ok_or_else(|| format!("no value: {line}"))?;
        let name = &line[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("bad metric name: {line}"));
        }
        let mut rest = &line[name_end..];
        if let Some(labels) = rest.strip_prefix('{') {
            rest = parse_labels(labels).ok_or_else(|| format!("bad labels: {line}"))?;
        }
        let value = rest
            .strip_prefix(' ')
            .ok_or_else(|| format!("no space before value: {line}"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| format!("bad value: {line}"))?,
        };
        series.insert(line[..line.len() - rest.len()].to_string(), value);
    }
    Ok(series)
}

/// Parses `key="value",...}` and returns what follows the closing brace.
fn parse_labels(mut s: &str) -> Option<&str> {
    loop {
        if let Some(rest) = s.strip_prefix('}') {
            return Some(rest);
        }
        let key_end = s.find('=')?;
        let key = &s[..key_end];
        let key_ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !key_ok {
            return None;
        }
        let mut chars = s[key_end + 1..].strip_prefix('"')?.char_indices();
        let value_start = key_end + 2;
        let value_end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()? {
                    (_, '\\' | '"' | 'n') => {}
                    _ => return None,
                },
                (i, '"') => break value_start + i,
                (_, '\n') => return None,
                _ => {}
            }
        };
        s = &s[value_end + 1..];
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

fn scrape(node: &Node) -> HashMap<String, f64> {
    let (status, content_type, body) = http_get(node.admin, "/metrics");
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

fn value(m: &HashMap<String, f64>, series: &str) -> f64 {
    m.get(series).copied().unwrap_or(0.0)
}

fn json(node: &Node, path: &str) -> serde_json::Value {
    let (status, content_type, body) = http_get(node.admin, path);
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    serde_json::from_str(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_bytes_and_offsets_exactly() {
    // An fsync after every append, so the flush histogram's count is exact too.
    let node = Node::start(&["log.flush.interval.messages=1"]);
    let mut conn = Conn::connect(node.kafka).await;
    create_topic(&mut conn, "metered").await;
    let before = scrape(&node);

    let batches: Vec<Bytes> = (0..3).map(|_| batch(4, now_ms())).collect();
    let sent: usize = batches.iter().map(|b| b.len()).sum();
    for b in batches {
        assert_eq!(produce(&mut conn, "metered", 0, b).await, 0);
    }
    assert_eq!(
        produce(&mut conn, "metered", 7, batch(1, now_ms())).await,
        3
    );
    assert_eq!(fetch_all(&mut conn, "metered").await, sent);

    let after = scrape(&node);
    let delta = |s: &str| value(&after, s) - value(&before, s);
    assert_eq!(delta("tidelog_requests_total{api=\"Produce\"}"), 4.0);
    assert_eq!(delta("tidelog_requests_total{api=\"Fetch\"}"), 1.0);
    assert_eq!(
        delta("tidelog_request_size_bytes_count{api=\"Produce\"}"),
        4.0
    );
    assert_eq!(delta("tidelog_log_flush_seconds_count"), 3.0);
    assert_eq!(
        delta("tidelog_request_errors_total{api=\"Produce\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"}"),
        1.0
    );
    let topic = "{topic=\"metered\"}";
    assert_eq!(
        value(&after, &format!("tidelog_topic_bytes_in_total{topic}")),
        sent as f64
    );
    assert_eq!(
        value(&after, &format!("tidelog_topic_messages_in_total{topic}")),
        12.0
    );
    assert_eq!(
        value(&after, &format!("tidelog_topic_bytes_out_total{topic}")),
        sent as f64
    );
    let partition = "{topic=\"metered\",partition=\"0\"}";
    for (name, want) in [
        ("tidelog_partition_log_start_offset", 0.0),
        ("tidelog_partition_log_end_offset", 12.0),
        ("tidelog_partition_high_watermark", 12.0),
        ("tidelog_partition_segments", 1.0),
        ("tidelog_partition_size_bytes", sent as f64),
    ] {
        let series = format!("{name}{partition}");
        assert_eq!(after.get(&series).copied(), Some(want), "{series}");
    }
    assert!(delta("tidelog_network_received_bytes_total") > sent as f64);
    assert!(delta("tidelog_network_sent_bytes_total") > sent as f64);
    assert!(value(&after, "tidelog_connections_active") >= 1.0);
    assert_eq!(value(&after, "tidelog_under_replicated_partitions"), 0.0);
    assert_eq!(value(&after, "tidelog_offline_partitions"), 0.0);
    assert!(value(&after, "tidelog_open_file_descriptors") > 0.0);

    // Latency is recorded after the response is written, so it may trail the reply.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = scrape(&node);
        let produced = value(
            &now,
            "tidelog_request_duration_seconds_count{api=\"Produce\"}",
        ) - value(
            &before,
            "tidelog_request_duration_seconds_count{api=\"Produce\"}",
        );
        if produced == 4.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Produce latency count {produced}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let topics = json(&node, "/v1/topics");
    let metered = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "metered")
        .expect("topic in /v1/topics");
    let p = &metered["partitions"][0];
    assert_eq!(p["partition"], 0);
    assert_eq!(p["log_start_offset"], 0);
    assert_eq!(p["log_end_offset"], 12);
    assert_eq!(p["high_watermark"], 12);
    assert_eq!(p["size_bytes"], sent);
    assert_eq!(p["isr"], p["replicas"]);

    let cluster = json(&node, "/v1/cluster");
    assert_eq!(cluster["brokers"].as_array().map(Vec::len), Some(1));
    assert_eq!(cluster["under_replicated_partitions"], 0);
    assert_eq!(cluster["offline_partitions"], 0);
    assert!(cluster["partitions"].as_u64().unwrap() >= 1);
    assert_eq!(http_get(node.admin, "/v1/nothing").0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_text_parses_as_prometheus_exposition() {
    let node = Node::start(&[]);
    let mut conn = Conn::connect(node.kafka).await;
    create_topic(&mut conn, "parsed").await;
    assert_eq!(produce(&mut conn, "parsed", 0, batch(2, now_ms())).await, 0);
    let (_, _, body) = http_get(node.admin, "/metrics");
    let series = parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    // Every sample belongs to a family announced by a # TYPE line.
    let families: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    for name in series.keys() {
        let base = name.split('{').next().unwrap();
        assert!(
            families.iter().any(|f| base == *f
                || base.strip_prefix(f).is_some_and(|s| {
                    matches!(s, "_total" | "_bucket" | "_sum" | "_count" | "_info")
                })),
            "{name} has no # TYPE"
        );
    }
    // The parser itself refuses what is not the format.
    assert!(parse_exposition("x{a=\"1\"} 1\n# EOF").is_ok());
    assert!(parse_exposition("x{a=1} 1\n# EOF").is_err());
    assert!(parse_exposition("x 1\n").is_err());
    assert!(parse_exposition("x one\n# EOF").is_err());
}

async fn commit_offset(conn: &mut Conn, group: &str, topic: &str, offset: i64) {
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(group.to_string()))
        .with_key_type(0);
    let _: FindCoordinatorResponse = conn.call(ApiKey::FindCoordinator, 3, &find).await;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    // The offsets partition loads in the background after FindCoordinator creates it.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let resp: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, 8, &req).await;
        let code = resp.topics[0].partitions[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            (14..=16).contains(&code) && Instant::now() < deadline,
            "OffsetCommit error {code}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_group_shows_lag_in_messages_seconds_and_a_rising_trend() {
    let node = Node::start(&[]);
    let mut conn = Conn::connect(node.kafka).await;
    create_topic(&mut conn, "lagged").await;
    let minute_ago = now_ms() - 60_000;
    assert_eq!(
        produce(&mut conn, "lagged", 0, batch(4, minute_ago)).await,
        0
    );
    assert_eq!(
        produce(&mut conn, "lagged", 0, batch(6, minute_ago + 1)).await,
        0
    );
    commit_offset(&mut conn, "slow-readers", "lagged", 4).await;

    let series =
        |name: &str| format!("{name}{{group=\"slow-readers\",topic=\"lagged\",partition=\"0\"}}");
    let first = scrape(&node);
    assert_eq!(
        first.get(&series("tidelog_group_committed_offset")),
        Some(&4.0)
    );
    assert_eq!(first.get(&series("tidelog_group_lag_messages")), Some(&6.0));
    // The first unread record (offset 4) is in the second batch, stamped a minute ago.
    let seconds = first[&series("tidelog_group_time_lag_seconds")];
    assert!((59.0..120.0).contains(&seconds), "time lag {seconds}");
    // No commit observed yet: no consumed rate, so no drain time.
    assert_eq!(first.get(&series("tidelog_group_drain_time_seconds")), None);
    let headroom = first[&series("tidelog_group_retention_headroom_seconds")];
    assert!(headroom > 86_400.0, "retention headroom {headroom}");

    // More records arrive while the group stands still: lag and its trend rise.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        produce(&mut conn, "lagged", 0, batch(10, now_ms())).await,
        0
    );
    let second = scrape(&node);
    assert_eq!(
        second.get(&series("tidelog_group_lag_messages")),
        Some(&16.0)
    );
    let trend = second[&series("tidelog_group_lag_trend_messages_per_second")];
    assert!(trend > 0.0, "trend {trend}");

    // Two commits observed by later looks give a consumed rate, and lag / rate is the
    // drain time.
    commit_offset(&mut conn, "slow-readers", "lagged", 6).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let _ = scrape(&node);
    commit_offset(&mut conn, "slow-readers", "lagged", 8).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let third = scrape(&node);
    let drain = third[&series("tidelog_group_drain_time_seconds")];
    // 2 offsets in about 1.2 s, 12 unread: about 7 s.
    assert!((3.0..9.0).contains(&drain), "drain time {drain}");

    let groups = json(&node, "/v1/groups");
    let group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "slow-readers")
        .expect("group in /v1/groups");
    let p = &group["partitions"][0];
    assert_eq!(
        (p["topic"].as_str(), p["partition"].as_i64()),
        (Some("lagged"), Some(0))
    );
    assert_eq!(p["committed_offset"], 8);
    assert_eq!(p["high_watermark"], 20);
    assert_eq!(p["lag_messages"], 12);
    assert!(p["drain_time_seconds"].as_f64().is_some(), "{p}");
    let time_lag = p["time_lag_seconds"].as_f64().unwrap();
    assert!(time_lag > 59.0, "{p}");
    // The first name of the time lag stays, as the field-name promise says.
    assert_eq!(p["lag_seconds"], p["time_lag_seconds"]);
}
