//! `isolation.level=read_committed` of the native `Consumer` against a real
//! `tidelog serve`: a transaction that is aborted and one that is committed, written
//! with the raw transactional APIs (InitProducerId, AddPartitionsToTxn, transactional
//! Produce, EndTxn). read_committed returns only the committed one, read_uncommitted
//! both; each ends at the log end (past both markers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
};
use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResponse;
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::{Conn, Node};
use tidelog_client::{Client, Consumer, ConsumerConfig, IsolationLevel, NewTopic, OffsetReset};

const TXN: &str = "rc-txn";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn batch(pid: i64, epoch: i16, sequence: i32, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: sequence + i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(v.to_string())),
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

/// One transaction of `values` on rc-0, ended with `commit`.
async fn transaction(
    conn: &mut Conn,
    pid: i64,
    epoch: i16,
    sequence: i32,
    values: &[&str],
    commit: bool,
) {
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(text(TXN)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(text("rc")))
            .with_partitions(vec![0])]);
    let added: AddPartitionsToTxnResponse = conn.call(ApiKey::AddPartitionsToTxn, 3, &add).await;
    let codes: Vec<i16> = added.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, vec![0]);
    let produce = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(text(TXN))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(text("rc")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch(pid, epoch, sequence, values)))])]);
    let produced: ProduceResponse = conn.call(ApiKey::Produce, 9, &produce).await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(TXN)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let ended: EndTxnResponse = conn.call(ApiKey::EndTxn, 3, &end).await;
    assert_eq!(ended.error_code, 0);
}

async fn read_all(node: &Node, isolation: IsolationLevel) -> Vec<String> {
    let mut config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        isolation_level: isolation,
        ..ConsumerConfig::default()
    };
    config.fetch.max_wait = Duration::from_millis(100);
    let client = Client::connect_to(&node.kafka.to_string()).await.unwrap();
    let mut consumer = Consumer::new(client, config).unwrap();
    let tp = ("rc".to_string(), 0);
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    let mut values = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        // Both markers passed: the position is the log end, whatever was returned.
        while consumer.position(&tp) != Some(8) {
            for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                values.push(String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap());
            }
        }
    })
    .await
    .expect("the consumer reaches the log end");
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_skips_the_aborted_transaction() {
    let node = Node::start(&[]);
    let mut client = Client::connect_to(&node.kafka.to_string()).await.unwrap();
    client
        .create_topic(&NewTopic {
            name: "rc".into(),
            partitions: 1,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
    let mut conn = Conn::connect(node.kafka).await;
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(text(TXN))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut started = None;
    for _ in 0..50 {
        let r: InitProducerIdResponse = conn.call(ApiKey::InitProducerId, 3, &init).await;
        if r.error_code == 0 {
            started = Some((r.producer_id.0, r.producer_epoch));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (pid, epoch) = started.expect("a transactional producer id");
    // Offsets: aborted 0..=2, abort marker 3, committed 4..=6, commit marker 7.
    transaction(&mut conn, pid, epoch, 0, &["a0", "a1", "a2"], false).await;
    transaction(&mut conn, pid, epoch, 3, &["c0", "c1", "c2"], true).await;

    assert_eq!(
        read_all(&node, IsolationLevel::ReadCommitted).await,
        ["c0", "c1", "c2"]
    );
    assert_eq!(
        read_all(&node, IsolationLevel::ReadUncommitted).await,
        ["a0", "a1", "a2", "c0", "c1", "c2"]
    );
}
