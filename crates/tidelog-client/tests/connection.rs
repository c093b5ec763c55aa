//! `Connection` against a scripted in-process broker: version negotiation (including the
//! v0 fallback), request timeouts and mismatched responses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse};
use kafka_protocol::ResponseError;
use tidelog_client::{ClientError, Connection, ConnectionConfig};
use tidelog_protocol::{decode_request_header, encode_response, read_frame};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// What the scripted broker does with a Metadata request.
#[derive(Clone, Copy)]
enum OnMetadata {
    Answer,
    Ignore,
    WrongCorrelation,
}

struct FakeBroker {
    addr: String,
    seen: Arc<Mutex<Vec<(ApiKey, i16)>>>,
}

fn range(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

/// A broker that supports ApiVersions only up to `api_versions_max` and Metadata 0..8.
async fn fake_broker(api_versions_max: i16, on_metadata: OnMetadata) -> FakeBroker {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        while let Ok(Some(frame)) = read_frame(&mut socket, 1 << 20).await {
            let mut frame: Bytes = frame.freeze();
            let header = decode_request_header(&mut frame).unwrap();
            log.lock()
                .unwrap()
                .push((header.api_key, header.api_version));
            let reply = match header.api_key {
                ApiKey::ApiVersions if header.api_version > api_versions_max => {
                    let body = ApiVersionsResponse::default()
                        .with_error_code(ResponseError::UnsupportedVersion.code())
                        .with_api_keys(vec![range(ApiKey::ApiVersions, 0, api_versions_max)]);
                    encode_response(header.correlation_id, ApiKey::ApiVersions, 0, &body)
                }
                ApiKey::ApiVersions => {
                    let body = ApiVersionsResponse::default().with_api_keys(vec![
                        range(ApiKey::ApiVersions, 0, api_versions_max),
                        range(ApiKey::Metadata, 0, 8),
                    ]);
                    encode_response(
                        header.correlation_id,
                        ApiKey::ApiVersions,
                        header.api_version,
                        &body,
                    )
                }
                ApiKey::Metadata => match on_metadata {
                    OnMetadata::Ignore => continue,
                    OnMetadata::Answer | OnMetadata::WrongCorrelation => {
                        let correlation = match on_metadata {
                            OnMetadata::WrongCorrelation => header.correlation_id + 100,
                            _ => header.correlation_id,
                        };
                        encode_response(
                            correlation,
                            ApiKey::Metadata,
                            header.api_version,
                            &MetadataResponse::default(),
                        )
                    }
                },
                other => panic!("unexpected {other:?}"),
            };
            if socket.write_all(&reply.unwrap()).await.is_err() {
                return;
            }
        }
    });
    FakeBroker { addr, seen }
}

fn config() -> ConnectionConfig {
    ConnectionConfig {
        request_timeout: Duration::from_millis(300),
        ..ConnectionConfig::default()
    }
}

#[tokio::test]
async fn negotiates_the_lower_maximum() {
    let broker = fake_broker(3, OnMetadata::Answer).await;
    let mut conn = Connection::connect(&broker.addr, &config()).await.unwrap();
    assert_eq!(conn.version(ApiKey::Metadata), Some(8));
    assert_eq!(conn.version(ApiKey::Produce), None);
    conn.send(&MetadataRequest::default()).await.unwrap();
    assert_eq!(
        *broker.seen.lock().unwrap(),
        vec![(ApiKey::ApiVersions, 3), (ApiKey::Metadata, 8)]
    );
}

#[tokio::test]
async fn falls_back_to_api_versions_v0() {
    let broker = fake_broker(2, OnMetadata::Answer).await;
    let mut conn = Connection::connect(&broker.addr, &config()).await.unwrap();
    assert_eq!(conn.version(ApiKey::ApiVersions), Some(2));
    conn.send(&MetadataRequest::default()).await.unwrap();
    assert_eq!(
        *broker.seen.lock().unwrap(),
        vec![
            (ApiKey::ApiVersions, 3),
            (ApiKey::ApiVersions, 0),
            (ApiKey::Metadata, 8)
        ]
    );
}

#[tokio::test]
async fn unsupported_api_is_refused_locally() {
    let broker = fake_broker(3, OnMetadata::Answer).await;
    let mut conn = Connection::connect(&broker.addr, &config()).await.unwrap();
    let err = conn
        .send(&kafka_protocol::messages::ProduceRequest::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::UnsupportedApi { .. }), "{err}");
    assert!(!conn.is_broken());
}

#[tokio::test]
async fn silent_broker_times_out_and_poisons_the_connection() {
    let broker = fake_broker(3, OnMetadata::Ignore).await;
    let mut conn = Connection::connect(&broker.addr, &config()).await.unwrap();
    let err = conn.send(&MetadataRequest::default()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Timeout {
                timeout_ms: 300,
                ..
            }
        ),
        "{err}"
    );
    assert!(conn.is_broken());
    let err = conn.send(&MetadataRequest::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
}

#[tokio::test]
async fn mismatched_correlation_id_is_an_error() {
    let broker = fake_broker(3, OnMetadata::WrongCorrelation).await;
    let mut conn = Connection::connect(&broker.addr, &config()).await.unwrap();
    let err = conn.send(&MetadataRequest::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::Protocol(_)), "{err}");
    assert!(conn.is_broken());
}

#[tokio::test]
async fn refused_connection_names_the_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = Connection::connect(&addr, &config()).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to {addr}")),
        "{err}"
    );
}
