//! Three whole nodes in one process on the in-memory network: their controller quorum,
//! their follower fetchers and their Kafka listeners all speak over it. The partition
//! leader is cut off; the majority elects another leader and keeps acknowledging
//! acks=all writes, the isolated leader acknowledges none, and once the network heals
//! the old leader catches up and every acknowledged record is at its offset.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_broker::{Broker, BrokerConfig, ClusterOptions, Environment};
use tidelog_controller::quorum::QuorumPeers;
use tidelog_env::clock::SystemClock;
use tidelog_env::net::{MemoryNetwork, Transport};
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tidelog_records::{BatchBuilder, LogRecords};
use tokio::io::AsyncWriteExt;

const TOPIC: &str = "orders";
const CALL: Duration = Duration::from_secs(5);
const FAILOVER: Duration = Duration::from_secs(60);

fn host(id: i32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, u8::try_from(id).unwrap()))
}

fn kafka_addr(id: i32) -> String {
    SocketAddr::new(host(id), 9092).to_string()
}

/// One request on a fresh connection from `from`; `None` if the network or the node
/// did not answer in time.
async fn call<Req: Encodable, Resp: Decodable>(
    net: &MemoryNetwork,
    from: i32,
    to: i32,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Option<Resp> {
    let transport = net.host(host(from));
    let exchange = async {
        let mut conn = transport.connect(&kafka_addr(to)).await.ok()?;
        let bytes = encode_request(key, version, 7, Some("in-memory-test"), body).ok()?;
        conn.write_all(&bytes).await.ok()?;
        let frame = read_frame(&mut conn, 64 << 20).await.ok()??;
        let (correlation, response) = decode_response::<Resp>(frame.freeze(), key, version).ok()?;
        (correlation == 7).then_some(response)
    };
    tokio::time::timeout(CALL, exchange).await.ok().flatten()
}

async fn eventually<T, F, Fut>(what: &str, within: Duration, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(
            started.elapsed() < within,
            "timed out after {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (leader, isr) of partition 0 as node `asked` sees it.
async fn partition_state(net: &MemoryNetwork, asked: i32) -> Option<(i32, Vec<i32>)> {
    let request = MetadataRequest::default().with_topics(None);
    let response: MetadataResponse =
        call(net, asked, asked, ApiKey::Metadata, 12, &request).await?;
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let p = topic.partitions.iter().find(|p| p.partition_index == 0)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Some((p.leader_id.0, isr))
}

/// Produces `value` with acks=all; the base offset if it was acknowledged.
async fn produce(
    net: &MemoryNetwork,
    from: i32,
    to: i32,
    value: &str,
    timeout_ms: i32,
) -> Option<i64> {
    let batch = BatchBuilder::new()
        .kv(None, Some(value.as_bytes()), 1_700_000_000_000)
        .build()
        .unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])]);
    let response: ProduceResponse = call(net, from, to, ApiKey::Produce, 9, &request).await?;
    let p = &response.responses.first()?.partition_responses.first()?;
    (p.error_code == 0).then_some(p.base_offset)
}

/// Every record of partition 0 up to the high watermark, read from `leader`.
async fn read_all(net: &MemoryNetwork, leader: i32) -> Option<BTreeMap<i64, String>> {
    let mut records = BTreeMap::new();
    let mut offset = 0;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response: FetchResponse =
            call(net, leader, leader, ApiKey::Fetch, 12, &request).await?;
        let data = response.responses.first()?.partitions.first()?;
        if data.error_code != 0 {
            return None;
        }
        let bytes = data.records.clone().unwrap_or_default();
        let mut walked = LogRecords::new(bytes);
        for record in walked.by_ref() {
            let record = record.ok()?;
            let value =
                String::from_utf8(record.value.map(|v| v.to_vec()).unwrap_or_default()).ok()?;
            records.insert(record.offset, value);
        }
        match walked.next_offset() {
            Some(next) if next > offset && next < data.high_watermark => offset = next,
            _ => return Some(records),
        }
    }
}

struct Cluster {
    net: MemoryNetwork,
    brokers: BTreeMap<i32, Broker>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    async fn start() -> Cluster {
        let net = MemoryNetwork::new();
        let peers: Vec<String> = (1..=3)
            .map(|id| format!("{id}@{}", SocketAddr::new(host(id), 9093)))
            .collect();
        let peers = QuorumPeers::parse(&peers.join(",")).unwrap();
        let mut dirs = Vec::new();
        let mut starting = Vec::new();
        for id in 1..=3 {
            let dir = tempfile::tempdir().unwrap();
            let mut config = BrokerConfig::new(
                id,
                kafka_addr(id).parse().unwrap(),
                "127.0.0.1:0".parse().unwrap(),
                dir.path().to_path_buf(),
            );
            for (name, value) in [
                ("broker.session.timeout.ms", "3000"),
                ("broker.heartbeat.interval.ms", "300"),
                ("replica.lag.time.max.ms", "2000"),
                ("replica.fetch.wait.max.ms", "200"),
                ("replica.fetch.backoff.ms", "200"),
            ] {
                config.set(name, value).unwrap();
            }
            dirs.push(dir);
            let options = ClusterOptions {
                peers: peers.clone(),
                controller_listen: None,
                controller: true,
            };
            let env = Environment {
                transport: Arc::new(net.host(host(id))),
                clock: Arc::new(SystemClock),
            };
            starting.push(tokio::spawn(Broker::start_in(config, Some(options), env)));
        }
        let mut brokers = BTreeMap::new();
        for (id, started) in (1..=3).zip(starting) {
            brokers.insert(id, started.await.unwrap().unwrap());
        }
        Cluster {
            net,
            brokers,
            _dirs: dirs,
        }
    }

    async fn create_topic(&self) {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_num_partitions(1)
                .with_replication_factor(3)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(StrBytes::from_static_str("min.insync.replicas"))
                    .with_value(Some(StrBytes::from_static_str("2")))])]);
        eventually("the topic is created", FAILOVER, || async {
            let response: CreateTopicsResponse =
                call(&self.net, 1, 1, ApiKey::CreateTopics, 5, &request).await?;
            let code = response.topics.first()?.error_code;
            // 36: TOPIC_ALREADY_EXISTS, from an earlier attempt that timed out.
            (code == 0 || code == 36).then_some(())
        })
        .await;
    }

    async fn shutdown(self) {
        for (_, broker) in self.brokers {
            tokio::time::timeout(Duration::from_secs(30), broker.shutdown())
                .await
                .expect("a node shuts down");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_acknowledges_nothing_and_the_majority_keeps_every_acknowledged_write() {
    let cluster = Cluster::start().await;
    let net = cluster.net.clone();
    cluster.create_topic().await;
    let old = eventually(
        "the partition has a leader and a full ISR",
        FAILOVER,
        || async {
            let (leader, isr) = partition_state(&net, 1).await?;
            (leader > 0 && isr == [1, 2, 3]).then_some(leader)
        },
    )
    .await;

    let mut acknowledged: Vec<(i64, String)> = Vec::new();
    for i in 0..20 {
        let value = format!("before-{i}");
        let offset = eventually("a write before the partition", FAILOVER, || {
            produce(&net, old, old, &value, 5_000)
        })
        .await;
        acknowledged.push((offset, value));
    }

    net.isolate(host(old));
    // The isolated leader can reach no follower and no controller: acks=all fails.
    assert_eq!(
        produce(&net, old, old, "never-acknowledged", 1_500).await,
        None
    );

    let survivor = (1..=3).find(|id| *id != old).unwrap();
    let new = eventually("the majority elects another leader", FAILOVER, || async {
        let (leader, _) = partition_state(&net, survivor).await?;
        (leader > 0 && leader != old).then_some(leader)
    })
    .await;
    for i in 0..20 {
        let value = format!("during-{i}");
        let offset = eventually("a write to the new leader", FAILOVER, || {
            produce(&net, new, new, &value, 5_000)
        })
        .await;
        acknowledged.push((offset, value));
    }

    net.heal_all();
    eventually(
        "the old leader catches up and rejoins the ISR",
        FAILOVER,
        || async {
            let (leader, isr) = partition_state(&net, new).await?;
            (leader == new && isr == [1, 2, 3]).then_some(())
        },
    )
    .await;
    let log = eventually("the log is readable", FAILOVER, || read_all(&net, new)).await;
    for (offset, value) in &acknowledged {
        assert_eq!(
            log.get(offset),
            Some(value),
            "acknowledged record at offset {offset}"
        );
    }
    cluster.shutdown().await;
}
