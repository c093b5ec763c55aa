//! Random and count-biased bytes decoded as every request and response type at every
//! version the codec supports: decoding may fail, but must never panic, and no single
//! allocation may be out of proportion to the input.

mod support;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use proptest::prelude::*;
use support::largest_allocation;
use tidelog_protocol::decode_request_header;

/// Every (api, version) pair kafka-protocol knows.
fn all_api_versions() -> Vec<(ApiKey, i16)> {
    ApiKey::iter()
        .flat_map(|key| {
            let range = key.valid_versions();
            (range.min..=range.max).map(move |v| (key, v))
        })
        .collect()
}

/// Decoded structs are bigger than their wire form; Vec doubling can add another 2x.
/// Anything beyond this per input byte is "absurd" (the bug this guards against asked
/// for gigabytes from four bytes).
fn allowance(input_len: usize) -> usize {
    64 * 1024 + 1024 * input_len
}

/// Bytes that look like the hostile lengths and counts a decoder meets first.
fn hostile_prefix() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![]),
        Just(vec![0x7f, 0xff, 0xff, 0xff]),
        Just(vec![0xff, 0xff, 0xff, 0xff]),
        Just(vec![0x80, 0x00, 0x00, 0x00]),
        Just(vec![0x00, 0x00, 0x00, 0x01, 0x7f, 0xff]),
        Just(vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
        Just(vec![0x02, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Just(vec![0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00]),
    ]
}

/// Mostly small values: zero counts, short lengths and nulls let decoding go deep into
/// nested structures instead of failing at the first field. (A plain map over random
/// bytes: a per-byte union strategy is far slower to generate.)
fn structured(b: u8) -> u8 {
    match b {
        0..=95 => 0,
        96..=139 => 1,
        140..=159 => 2,
        160..=175 => 0xff,
        _ => b,
    }
}

fn tail() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..192),
        proptest::collection::vec(any::<u8>(), 0..192)
            .prop_map(|v| v.into_iter().map(structured).collect()),
    ]
}

fn input() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let pairs = all_api_versions().len();
    (0..pairs, hostile_prefix(), tail()).prop_map(|(i, mut prefix, tail)| {
        prefix.extend_from_slice(&tail);
        (i, prefix)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn request_bodies_never_panic((i, body) in input()) {
        let (key, version) = all_api_versions()[i];
        let mut buf = Bytes::from(body.clone());
        let (_, largest) = largest_allocation(|| RequestKind::decode(key, &mut buf, version));
        prop_assert!(largest <= allowance(body.len()), "{key:?} v{version}: {largest} bytes");
    }

    #[test]
    fn response_bodies_never_panic((i, body) in input()) {
        let (key, version) = all_api_versions()[i];
        let mut buf = Bytes::from(body.clone());
        let (_, largest) = largest_allocation(|| ResponseKind::decode(key, &mut buf, version));
        prop_assert!(largest <= allowance(body.len()), "{key:?} v{version}: {largest} bytes");
    }

    #[test]
    fn whole_request_frames_never_panic((i, body) in input(), corr in any::<i32>(), raw_key in any::<bool>()) {
        // A plausible fixed header (or a random api key), then hostile bytes.
        let (key, version) = all_api_versions()[i];
        let mut frame = BytesMut::new();
        frame.put_i16(if raw_key { i16::from_be_bytes([body.first().copied().unwrap_or(0), 7]) } else { key as i16 });
        frame.put_i16(version);
        frame.put_i32(corr);
        frame.extend_from_slice(&body);
        let mut frame = frame.freeze();
        let len = frame.len();
        let (_, largest) = largest_allocation(|| {
            if let Ok(header) = decode_request_header(&mut frame) {
                assert_eq!(header.correlation_id, corr);
                let _ = RequestKind::decode(header.api_key, &mut frame, header.api_version);
            }
        });
        prop_assert!(largest <= allowance(len), "{largest} bytes");
    }
}
