//! Property: whatever records go into the builder come back out of the iterator (and
//! the internal-topic reader) byte for byte, for every codec, and pass validation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use proptest::prelude::*;
use tidelog_records::{
    records_block, validate, BatchBuilder, BatchHeader, BatchHeaderMut, Codec, LogRecords,
    RecordIter, Rules,
};

type Header = (String, Option<Vec<u8>>);

#[derive(Debug, Clone)]
struct Rec {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: i64,
    headers: Vec<Header>,
}

fn bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..200))
}

fn record() -> impl Strategy<Value = Rec> {
    // Few distinct header keys, so repeats are common.
    let header = (
        prop::sample::select(vec!["a", "b", "trace-id", ""]),
        bytes(),
    )
        .prop_map(|(k, v)| (k.to_string(), v));
    (
        bytes(),
        bytes(),
        -1_000_000i64..1_000_000,
        prop::collection::vec(header, 0..6),
    )
        .prop_map(|(key, value, delta, headers)| Rec {
            key,
            value,
            timestamp: 1_700_000_000_000 + delta,
            headers,
        })
}

fn codec() -> impl Strategy<Value = Codec> {
    prop::sample::select(Codec::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn build_then_iterate_round_trips(
        recs in prop::collection::vec(record(), 1..40),
        codec in codec(),
        base_offset in 0i64..1 << 40,
    ) {
        let mut builder = BatchBuilder::new().compression(codec).producer(11, 3, 7);
        for r in &recs {
            builder.push(r.timestamp, r.key.as_deref(), r.value.as_deref(), &r.headers);
        }
        let mut batch = builder.encode().unwrap();
        BatchHeaderMut::new(&mut batch).unwrap().set_base_offset(base_offset);
        let rules = Rules { from_client: true, require_keys: false, max_inflated_bytes: 1 << 20, timestamps: None };
        prop_assert_eq!(validate(&batch, &rules), Ok(batch.len()));

        let h = BatchHeader::new(&batch).unwrap();
        prop_assert_eq!(h.codec(), Some(codec));
        prop_assert_eq!(h.record_count() as usize, recs.len());
        prop_assert_eq!(h.max_timestamp(), recs.iter().map(|r| r.timestamp).max().unwrap());
        let block = records_block(&batch, 1 << 20).unwrap();
        let mut iter = RecordIter::new(&block, h.record_count());
        for (i, (sent, got)) in recs.iter().zip(iter.by_ref()).enumerate() {
            let got = got.unwrap();
            prop_assert_eq!(i64::from(got.offset_delta), i as i64);
            prop_assert_eq!(h.base_offset() + i64::from(got.offset_delta), base_offset + i as i64);
            prop_assert_eq!(h.record_timestamp(got.timestamp_delta), sent.timestamp);
            prop_assert_eq!(got.key, sent.key.as_deref());
            prop_assert_eq!(got.value, sent.value.as_deref());
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                got.headers().map(|x| (x.key, x.value)).collect();
            let expected: Vec<(&[u8], Option<&[u8]>)> = sent
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                .collect();
            prop_assert_eq!(headers, expected);
        }
        prop_assert_eq!(iter.trailing_bytes(), 0);

        let replayed: Vec<_> = LogRecords::new(Bytes::from(batch.clone()))
            .map(Result::unwrap)
            .collect();
        prop_assert_eq!(replayed.len(), recs.len());
        for (i, (sent, got)) in recs.iter().zip(&replayed).enumerate() {
            prop_assert_eq!(got.offset, base_offset + i as i64);
            prop_assert_eq!(got.timestamp, sent.timestamp);
            prop_assert_eq!(got.key.as_deref(), sent.key.as_deref());
            prop_assert_eq!(got.value.as_deref(), sent.value.as_deref());
            prop_assert_eq!((got.producer_id, got.producer_epoch), (11, 3));
        }
    }

    #[test]
    fn validation_never_panics_on_arbitrary_records(
        body in prop::collection::vec(any::<u8>(), 0..300),
        count in -2i32..6,
        codec in codec(),
    ) {
        let template = BatchBuilder::new().kv(Some(b"k"), Some(b"v"), 0).encode().unwrap();
        let mut batch = template[..61].to_vec();
        let compressed = tidelog_records::compress(codec, &body).unwrap();
        batch.extend_from_slice(&compressed);
        let len = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&len.to_be_bytes());
        batch[21..23].copy_from_slice(&codec.attribute_bits().to_be_bytes());
        batch[23..27].copy_from_slice(&(count - 1).max(0).to_be_bytes());
        batch[57..61].copy_from_slice(&count.to_be_bytes());
        BatchHeaderMut::new(&mut batch).unwrap().refresh_crc();
        let rules = Rules { from_client: true, require_keys: true, max_inflated_bytes: 1 << 16, timestamps: None };
        let _ = validate(&batch, &rules);
        let _ = LogRecords::new(Bytes::from(batch)).count();
    }
}
