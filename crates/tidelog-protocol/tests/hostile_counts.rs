//! Declared lengths and counts from the wire must be checked against the bytes that remain
//! before anything is allocated (the class of Kafka's CVE-2022-34917). Each case decodes a
//! hand-built hostile body, expects an error (not an abort), and checks the largest single
//! allocation stayed proportional to the input.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns build fixed inputs

mod support;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, MetadataRequest, ProduceRequest, RequestKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::largest_allocation;
use tidelog_protocol::client::encode_request;
use tidelog_protocol::{decode_request_body, decode_request_header, ProtocolError};

/// Generous allowance for fixed-size bookkeeping (error messages, backtraces off).
const SLACK: usize = 64 * 1024;

fn assert_rejected(api_key: ApiKey, version: i16, body: &[u8]) {
    let mut buf = Bytes::copy_from_slice(body);
    let (result, largest) = largest_allocation(|| RequestKind::decode(api_key, &mut buf, version));
    assert!(
        result.is_err(),
        "{api_key:?} v{version} accepted {body:02x?}"
    );
    assert!(
        largest <= SLACK + 4 * body.len(),
        "{api_key:?} v{version}: a {}-byte body caused a {largest}-byte allocation",
        body.len()
    );
}

#[test]
fn metadata_v1_topic_count_i32_max_is_an_error_not_an_abort() {
    // The exact packet of the DESIGN.md finding: topic count i32::MAX, nothing else.
    let mut body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
    let (result, largest) =
        largest_allocation(|| decode_request_body::<MetadataRequest>(&mut body, 1));
    assert!(matches!(
        result,
        Err(ProtocolError::Decode { version: 1, .. })
    ));
    assert!(largest < SLACK, "allocated {largest} bytes");
}

#[test]
fn the_same_packet_through_the_server_path() {
    let mut frame = encode_request(
        ApiKey::Metadata,
        1,
        42,
        Some("x"),
        &MetadataRequest::default(),
    )
    .unwrap()
    .slice(4..);
    let header = decode_request_header(&mut frame).unwrap();
    assert_eq!(header.correlation_id, 42);
    // Replace the (empty) body with the hostile one.
    let mut body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
    assert!(decode_request_body::<MetadataRequest>(&mut body, header.api_version).is_err());
}

#[test]
fn count_within_remaining_bytes_does_not_reserve_element_sized_memory() {
    // 65536 topics declared and 65536 bytes present: the count passes the byte check, but
    // 65536 in-memory topic structs are megabytes. The first element (name length -2)
    // fails; nothing large may have been reserved before that.
    let n = 65_536usize;
    let mut body = Vec::with_capacity(4 + n);
    body.put_i32(n as i32);
    while body.len() < 4 + n {
        body.put_i16(-2);
    }
    assert_rejected(ApiKey::Metadata, 1, &body);
}

#[test]
fn huge_string_length() {
    // one topic whose name claims 32767 bytes, two present
    assert_rejected(ApiKey::Metadata, 1, &[0, 0, 0, 1, 0x7f, 0xff, b'a', b'b']);
}

#[test]
fn huge_compact_string_length() {
    // v12: compact array of 1 topic, zero topic id, name length u32::MAX - 1
    let mut body = vec![0x02];
    body.extend_from_slice(&[0; 16]);
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_rejected(ApiKey::Metadata, 12, &body);
}

#[test]
fn huge_compact_array_count() {
    assert_rejected(
        ApiKey::Metadata,
        9,
        &[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0],
    );
    // an unterminated varint
    assert_rejected(ApiKey::Metadata, 9, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
}

fn produce_v3_prefix() -> Vec<u8> {
    let mut b = Vec::new();
    b.put_i16(-1); // transactional id: null
    b.put_i16(1); // acks
    b.put_i32(1000); // timeout
    b.put_i32(1); // one topic
    b.put_i16(1);
    b.put_u8(b't');
    b.put_i32(1); // one partition
    b.put_i32(0); // index
    b
}

#[test]
fn huge_bytes_length() {
    let mut body = produce_v3_prefix();
    body.put_i32(i32::MAX); // records: 2 GiB declared
    body.extend_from_slice(&[0; 8]);
    assert_rejected(ApiKey::Produce, 3, &body);
}

#[test]
fn huge_compact_bytes_length() {
    let mut b = vec![0x00]; // transactional id: null
    b.put_i16(1);
    b.put_i32(1000);
    b.extend_from_slice(&[0x02, 0x02, b't', 0x02]); // 1 topic "t", 1 partition
    b.put_i32(0);
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // records length ~4 GiB
    assert_rejected(ApiKey::Produce, 9, &b);
}

#[test]
fn negative_sizes() {
    assert_rejected(ApiKey::Metadata, 1, &[0xff, 0xff, 0xff, 0xfe]); // array -2
    assert_rejected(ApiKey::Metadata, 1, &[0x80, 0, 0, 0]); // array i32::MIN
    assert_rejected(ApiKey::Metadata, 1, &[0, 0, 0, 1, 0xff, 0xfe]); // string -2
    let mut body = produce_v3_prefix();
    body.put_i32(-2); // bytes -2
    assert_rejected(ApiKey::Produce, 3, &body);
}

#[test]
fn trailing_bytes_after_a_valid_body_are_rejected() {
    let req = ProduceRequest::default();
    let mut buf = BytesMut::new();
    req.encode(&mut buf, 3).unwrap();
    buf.put_u8(0);
    let mut body = buf.freeze();
    assert!(matches!(
        decode_request_body::<ProduceRequest>(&mut body, 3),
        Err(ProtocolError::TrailingBytes { remaining: 1, .. })
    ));
}

fn one_record_batch() -> BytesMut {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"value")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
    buf
}

/// Rewrites the batch CRC-32C (over attributes..end, bytes 21..) after a mutation.
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn record_count_i32_max_in_a_batch() {
    let mut batch = one_record_batch();
    batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut batch);
    let mut buf = batch.freeze();
    let len = buf.len();
    let (result, largest) = largest_allocation(|| RecordBatchDecoder::decode_all(&mut buf));
    assert!(result.is_err());
    assert!(largest < SLACK + 4 * len, "allocated {largest} bytes");
}

#[test]
fn record_header_count_beyond_remaining_bytes() {
    let mut batch = one_record_batch();
    // The record is the tail of the batch; its last byte is the header count varint (0).
    // Replace it with a 5-byte varint claiming ~2^31 headers (zigzag of i32::MAX).
    let last = batch.len() - 1;
    assert_eq!(batch[last], 0);
    batch.truncate(last);
    batch.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    // Record length varint (after the 61-byte header) grows by 4: single-byte zigzag.
    let old_len = batch[61] as i32 / 2;
    batch[61] = ((old_len + 4) * 2) as u8;
    let batch_len = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&batch_len.to_be_bytes());
    fix_crc(&mut batch);
    let mut buf = batch.freeze();
    let len = buf.len();
    let (result, largest) = largest_allocation(|| RecordBatchDecoder::decode_all(&mut buf));
    let err = result.unwrap_err().to_string();
    assert!(err.contains("headers"), "unexpected error: {err}");
    assert!(largest < SLACK + 4 * len, "allocated {largest} bytes");
}

#[test]
fn unmodified_batch_still_decodes() {
    // Guards the two tests above: their only difference from this input is the mutation.
    let mut buf = one_record_batch().freeze();
    let sets = RecordBatchDecoder::decode_all(&mut buf).unwrap();
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].records[0].value.as_deref(), Some(&b"value"[..]));
}

#[test]
fn metadata_request_with_topics_round_trips() {
    // Guards the hostile cases: the same shapes, honest, decode fine.
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName::from(
            kafka_protocol::protocol::StrBytes::from_static_str("orders"),
        )))]));
    for version in [1i16, 9, 12] {
        let mut buf = BytesMut::new();
        req.encode(&mut buf, version).unwrap();
        let back = MetadataRequest::decode(&mut buf.freeze(), version).unwrap();
        assert_eq!(back, req);
    }
}

#[test]
fn codec_header_helper_rejects_short_buffers() {
    for len in 0..4 {
        let mut buf = Bytes::from(vec![0u8; len]);
        assert!(kafka_protocol::protocol::decode_request_header_from_buffer(&mut buf).is_err());
    }
}
