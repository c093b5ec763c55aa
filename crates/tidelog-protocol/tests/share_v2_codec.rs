//! The vendored codec's ShareFetch / ShareAcknowledge v2 (a tidelog patch, see
//! vendor/kafka-protocol/PATCHES.md): the new fields sit where Kafka 4.2's schemas put
//! them, round-trip, and cannot be sent at v1.

#![allow(clippy::unwrap_used)] // fixed inputs

use bytes::BytesMut;
use kafka_protocol::messages::share_acknowledge_request::ShareAcknowledgeRequest;
use kafka_protocol::messages::share_acknowledge_response::ShareAcknowledgeResponse;
use kafka_protocol::messages::share_fetch_request::ShareFetchRequest;
use kafka_protocol::protocol::{Decodable, Encodable};

fn encode<T: Encodable>(message: &T, version: i16) -> Result<BytesMut, String> {
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, version)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

#[test]
fn share_fetch_v2_carries_the_acquire_mode_and_the_renew_flag_after_batch_size() {
    let request = ShareFetchRequest::default()
        .with_batch_size(7)
        .with_share_acquire_mode(1)
        .with_is_renew_ack(true);
    let v1 = encode(
        &request
            .clone()
            .with_share_acquire_mode(0)
            .with_is_renew_ack(false),
        1,
    )
    .unwrap();
    let v2 = encode(&request, 2).unwrap();
    assert_eq!(v2.len(), v1.len() + 2, "an int8 and a boolean more");
    // group (null), member (empty), then six int32s up to batch_size.
    let after_batch_size = 1 + 1 + 6 * 4;
    assert_eq!(
        &v2[after_batch_size - 4..after_batch_size],
        &7i32.to_be_bytes()
    );
    assert_eq!(&v2[after_batch_size..after_batch_size + 2], &[1, 1]);
    let decoded = ShareFetchRequest::decode(&mut v2.freeze(), 2).unwrap();
    assert_eq!(decoded, request);
    assert!(encode(&request, 1).is_err(), "v1 has no renew flag");
    assert!(encode(&request, 3).is_err());
}

#[test]
fn share_acknowledge_v2_carries_the_renew_flag_and_answers_the_lock_duration() {
    let request = ShareAcknowledgeRequest::default()
        .with_share_session_epoch(3)
        .with_is_renew_ack(true);
    let v2 = encode(&request, 2).unwrap();
    // group (null), member (empty), epoch, then the flag.
    assert_eq!(&v2[2..6], &3i32.to_be_bytes());
    assert_eq!(v2[6], 1);
    assert_eq!(
        ShareAcknowledgeRequest::decode(&mut v2.freeze(), 2).unwrap(),
        request
    );
    assert!(encode(&request, 1).is_err());

    let response = ShareAcknowledgeResponse::default().with_acquisition_lock_timeout_ms(4000);
    let v2 = encode(&response, 2).unwrap();
    // throttle, error code, error message (null), then the lock duration.
    assert_eq!(&v2[7..11], &4000i32.to_be_bytes());
    assert_eq!(
        ShareAcknowledgeResponse::decode(&mut v2.freeze(), 2).unwrap(),
        response
    );
    let v1 = encode(&response, 1).unwrap();
    assert_eq!(v1.len() + 4, encode(&response, 2).unwrap().len());
}
