//! Client + Producer against a scripted broker whose first answers say "not the leader":
//! the producer must refresh metadata, resend, and report the offsets of the resent batch.
//! The same scripted broker checks the idempotent producer's side: a resend keeps its
//! producer id and sequence, DUPLICATE_SEQUENCE_NUMBER is success, and a sequence error
//! fails the buffered records and is followed by a new producer id.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, InitProducerIdResponse, MetadataResponse,
    ProduceRequest, ProduceResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tidelog_client::{Client, ClientConfig, ProduceRecord, Producer, ProducerConfig};
use tidelog_protocol::{decode_request_body, decode_request_header, encode_response, read_frame};
use tidelog_records::BatchHeader;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

#[derive(Default)]
struct Counters {
    metadata: AtomicUsize,
    produce: AtomicUsize,
    init_producer_id: AtomicUsize,
    /// (producer id, base sequence) of every produced batch.
    sequences: Mutex<Vec<(i64, i32)>>,
}

fn api(key: ApiKey, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(0)
        .with_max_version(max)
}

fn metadata(port: i32) -> MetadataResponse {
    MetadataResponse::default()
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(port)])
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(vec![MetadataResponsePartition::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])])])
}

/// Answers Produce with NOT_LEADER_OR_FOLLOWER `refusals` times, then with base offset 42
/// and error code `last`.
async fn serve(
    mut socket: TcpStream,
    port: i32,
    (refusals, last): (usize, i16),
    counters: Arc<Counters>,
) {
    while let Ok(Some(frame)) = read_frame(&mut socket, 1 << 20).await {
        let mut frame: Bytes = frame.freeze();
        let h = decode_request_header(&mut frame).unwrap();
        let (id, v) = (h.correlation_id, h.api_version);
        let reply = match h.api_key {
            ApiKey::ApiVersions => {
                let body = ApiVersionsResponse::default().with_api_keys(vec![
                    api(ApiKey::ApiVersions, 3),
                    api(ApiKey::Metadata, 12),
                    api(ApiKey::Produce, 11),
                    api(ApiKey::InitProducerId, 4),
                ]);
                encode_response(id, h.api_key, v, &body)
            }
            ApiKey::Metadata => {
                counters.metadata.fetch_add(1, Ordering::SeqCst);
                encode_response(id, h.api_key, v, &metadata(port))
            }
            ApiKey::InitProducerId => {
                let n = counters.init_producer_id.fetch_add(1, Ordering::SeqCst);
                let body = InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(7 + i64::try_from(n).unwrap()))
                    .with_producer_epoch(0);
                encode_response(id, h.api_key, v, &body)
            }
            ApiKey::Produce => {
                let req: ProduceRequest = decode_request_body(&mut frame, v).unwrap();
                let records = req.topic_data[0].partition_data[0].records.clone().unwrap();
                assert!(records.len() > 61, "a whole batch is sent each time");
                let batch = BatchHeader::new(&records).unwrap();
                counters
                    .sequences
                    .lock()
                    .unwrap()
                    .push((batch.producer_id(), batch.base_sequence()));
                let n = counters.produce.fetch_add(1, Ordering::SeqCst);
                let partition = if n < refusals {
                    PartitionProduceResponse::default()
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                        .with_base_offset(-1)
                } else {
                    PartitionProduceResponse::default()
                        .with_error_code(last)
                        .with_base_offset(42)
                };
                let body =
                    ProduceResponse::default()
                        .with_responses(vec![TopicProduceResponse::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")))
                            .with_partition_responses(vec![partition])]);
                encode_response(id, h.api_key, v, &body)
            }
            other => panic!("unexpected {other:?}"),
        };
        if socket.write_all(&reply.unwrap()).await.is_err() {
            return;
        }
    }
}

async fn broker(refusals: usize) -> (String, Arc<Counters>) {
    scripted(refusals, 0).await
}

async fn scripted(refusals: usize, last: i16) -> (String, Arc<Counters>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    let counters = Arc::new(Counters::default());
    let shared = counters.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket, port, (refusals, last), shared.clone()));
        }
    });
    (format!("127.0.0.1:{port}"), counters)
}

fn record(i: u8) -> ProduceRecord {
    ProduceRecord::new(Some(Bytes::from(vec![i])), Some(Bytes::from(vec![i; 3])))
}

async fn producer(addr: &str) -> Producer {
    let mut config = ClientConfig::new(addr).unwrap();
    config.retry_backoff = Duration::from_millis(10);
    config.retries = 3;
    let client = Client::connect(config).await.unwrap();
    Producer::new(client, ProducerConfig::default())
}

#[tokio::test]
async fn not_leader_is_retried_after_a_metadata_refresh() {
    let (addr, counters) = broker(2).await;
    let mut producer = producer(&addr).await;
    for i in 0..3 {
        producer.send("t", None, record(i)).await.unwrap();
    }
    let before = counters.metadata.load(Ordering::SeqCst);
    let written = producer.flush().await.unwrap();
    let offsets: Vec<(i32, i64)> = written.iter().map(|m| (m.partition, m.offset)).collect();
    assert_eq!(offsets, vec![(0, 42), (0, 43), (0, 44)]);
    assert_eq!(counters.produce.load(Ordering::SeqCst), 3);
    assert!(
        counters.metadata.load(Ordering::SeqCst) >= before + 2,
        "metadata refreshed"
    );
}

#[tokio::test]
async fn retries_are_bounded() {
    let (addr, counters) = broker(usize::MAX).await;
    let mut producer = producer(&addr).await;
    producer.send("t", Some(0), record(1)).await.unwrap();
    let err = producer.flush().await.unwrap_err();
    assert!(err.to_string().contains("t-0"), "{err}");
    // The first attempt plus `retries` more.
    assert_eq!(counters.produce.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_retried_batch_keeps_its_producer_id_and_sequence() {
    let (addr, counters) = broker(2).await;
    let mut producer = producer(&addr).await;
    for i in 0..3 {
        producer.send("t", Some(0), record(i)).await.unwrap();
    }
    producer.flush().await.unwrap();
    producer.send("t", Some(0), record(3)).await.unwrap();
    producer.flush().await.unwrap();
    assert_eq!(counters.init_producer_id.load(Ordering::SeqCst), 1);
    assert_eq!(
        *counters.sequences.lock().unwrap(),
        vec![(7, 0), (7, 0), (7, 0), (7, 3)],
        "three tries of the first batch, then the next sequence"
    );
    assert_eq!(producer.producer_id(), Some((7, 0)));
}

#[tokio::test]
async fn duplicate_sequence_number_is_success() {
    let (addr, _) = scripted(0, ResponseError::DuplicateSequenceNumber.code()).await;
    let mut producer = producer(&addr).await;
    producer.send("t", Some(0), record(1)).await.unwrap();
    let written = producer.flush().await.unwrap();
    assert_eq!(written[0].offset, 42);
}

#[tokio::test]
async fn out_of_order_sequence_fails_every_buffered_record_and_a_new_producer_id_follows() {
    let (addr, counters) = scripted(0, ResponseError::OutOfOrderSequenceNumber.code()).await;
    let mut producer = producer(&addr).await;
    producer.send("t", Some(0), record(1)).await.unwrap();
    let err = producer.flush().await.unwrap_err();
    assert!(
        matches!(
            err,
            tidelog_client::ClientError::ProducerSequence {
                producer_id: 7,
                error: ResponseError::OutOfOrderSequenceNumber,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("OUT_OF_ORDER_SEQUENCE_NUMBER"),
        "{err}"
    );
    assert_eq!(
        producer.buffered(),
        (0, 0),
        "the failed records are not kept"
    );
    // Not resent silently under the old identity: the next send starts over.
    producer.send("t", Some(0), record(2)).await.unwrap();
    let _ = producer.flush().await;
    assert_eq!(counters.init_producer_id.load(Ordering::SeqCst), 2);
    assert_eq!(*counters.sequences.lock().unwrap(), vec![(7, 0), (8, 0)]);
}

#[tokio::test]
async fn idempotence_with_acks_other_than_all_is_refused() {
    let (addr, counters) = broker(0).await;
    let client = Client::connect(ClientConfig::new(&addr).unwrap())
        .await
        .unwrap();
    let mut config = ProducerConfig::default();
    config.set("acks", "1").unwrap();
    let mut producer = Producer::new(client, config);
    let err = producer.send("t", Some(0), record(1)).await.unwrap_err();
    assert!(err.to_string().contains("enable.idempotence"), "{err}");
    assert_eq!(counters.produce.load(Ordering::SeqCst), 0);
}
