//! A three-node cluster in one process on the in-memory network, and the few Kafka
//! calls the tests make to it.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_broker::{Broker, BrokerConfig, ClusterOptions, Environment};
use tidelog_controller::quorum::QuorumPeers;
use tidelog_env::clock::SystemClock;
use tidelog_env::net::{MemoryNetwork, Transport};
use tidelog_protocol::client::{decode_response, encode_request};
use tidelog_protocol::frame::read_frame;
use tidelog_records::BatchBuilder;
use tokio::io::AsyncWriteExt;

pub(crate) const CALL: Duration = Duration::from_secs(5);
pub(crate) const FAILOVER: Duration = Duration::from_secs(60);

pub(crate) fn host(id: i32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, u8::try_from(id).unwrap()))
}

pub(crate) fn kafka_addr(id: i32) -> String {
    SocketAddr::new(host(id), 9092).to_string()
}

/// One request on a fresh connection from `from`; `None` if the network or the node
/// did not answer within `within`.
pub(crate) async fn call_within<Req: Encodable, Resp: Decodable>(
    net: &MemoryNetwork,
    from: i32,
    to: i32,
    key: ApiKey,
    version: i16,
    body: &Req,
    within: Duration,
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
    tokio::time::timeout(within, exchange).await.ok().flatten()
}

/// [`call_within`] the usual [`CALL`] time.
pub(crate) async fn call<Req: Encodable, Resp: Decodable>(
    net: &MemoryNetwork,
    from: i32,
    to: i32,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Option<Resp> {
    call_within(net, from, to, key, version, body, CALL).await
}

pub(crate) async fn eventually<T, F, Fut>(what: &str, within: Duration, mut attempt: F) -> T
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

/// Produces `value` to partition 0 of `topic` with acks=all; the base offset if it was
/// acknowledged within `timeout_ms`.
pub(crate) async fn produce(
    net: &MemoryNetwork,
    from: i32,
    to: i32,
    topic: &str,
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
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])]);
    let within = CALL + Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    let response: ProduceResponse =
        call_within(net, from, to, ApiKey::Produce, 9, &request, within).await?;
    let p = &response.responses.first()?.partition_responses.first()?;
    (p.error_code == 0).then_some(p.base_offset)
}

/// (leader, isr) of partition 0 of `topic` as node `asked` sees it.
pub(crate) async fn partition_state(
    net: &MemoryNetwork,
    topic: &str,
    asked: i32,
) -> Option<(i32, Vec<i32>)> {
    let request = MetadataRequest::default().with_topics(None);
    let response: MetadataResponse =
        call(net, asked, asked, ApiKey::Metadata, 12, &request).await?;
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let p = topic.partitions.iter().find(|p| p.partition_index == 0)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Some((p.leader_id.0, isr))
}

pub(crate) struct Cluster {
    pub(crate) net: MemoryNetwork,
    pub(crate) brokers: BTreeMap<i32, Broker>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    /// Three voters that are also brokers, with `settings` on each.
    pub(crate) async fn start(settings: &[(&str, &str)]) -> Cluster {
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
            for (name, value) in settings {
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

    /// Creates `topic` with one partition, replication factor 3 and `configs`.
    pub(crate) async fn create_topic(&self, topic: &str, configs: &[(&str, &str)]) {
        let configs = configs
            .iter()
            .map(|(name, value)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(name.to_string()))
                    .with_value(Some(StrBytes::from_string(value.to_string())))
            })
            .collect();
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(1)
                .with_replication_factor(3)
                .with_configs(configs)]);
        eventually("the topic is created", FAILOVER, || async {
            let response: CreateTopicsResponse =
                call(&self.net, 1, 1, ApiKey::CreateTopics, 5, &request).await?;
            let code = response.topics.first()?.error_code;
            // 36: TOPIC_ALREADY_EXISTS, from an earlier attempt that timed out.
            (code == 0 || code == 36).then_some(())
        })
        .await;
    }

    pub(crate) async fn shutdown(self) {
        for (_, broker) in self.brokers {
            tokio::time::timeout(Duration::from_secs(30), broker.shutdown())
                .await
                .expect("a node shuts down");
        }
    }
}
