//! Records as the application sees them, and their conversion to and from Kafka RecordBatch v2.

use bytes::Bytes;
use kafka_protocol::records::Compression;
use tidelog_records::BatchHeader;

use crate::error::{ClientError, Result};

/// One record to produce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProduceRecord {
    /// The key; `None` is a null key (partitioned sticky / round-robin).
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers in order; keys may repeat.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// CreateTime in ms since the epoch; `None` means "now" at encoding time.
    pub timestamp: Option<i64>,
}

impl ProduceRecord {
    /// A record with only a key and a value.
    pub fn new(key: Option<Bytes>, value: Option<Bytes>) -> Self {
        ProduceRecord {
            key,
            value,
            ..ProduceRecord::default()
        }
    }

    /// Approximate encoded size, used to cap batch sizes.
    pub(crate) fn approx_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
            + 21
    }
}

/// One record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp in ms (CreateTime, or the broker's LogAppendTime for such topics).
    pub timestamp: i64,
    /// Whether `timestamp` is the broker's append time.
    pub log_append_time: bool,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// The headers in order, repeated keys included.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The producer id of its batch (-1 for a producer that is not idempotent): with an
    /// idempotency key from the headers, the record's identity (see [`crate::sink`]).
    pub producer_id: i64,
}

/// Encodes `records` as exactly one RecordBatch v2 (baseOffset 0, no producer id), as a
/// non-idempotent producer sends it. Records without a timestamp get `now_ms`.
pub fn encode_batch(
    records: &[ProduceRecord],
    compression: Compression,
    now_ms: i64,
) -> Result<Bytes> {
    if records.is_empty() {
        return Err(ClientError::InvalidArgument(
            "a record batch needs at least one record".into(),
        ));
    }
    crate::batch::write_batch(records, compression, now_ms, None, false)
}

/// What [`decode_fetched`] found in a fetch response's record bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DecodedRecords {
    /// Data records at or after the fetch offset, in offset order (control records dropped).
    pub records: Vec<ConsumedRecord>,
    /// The offset to fetch next: one past the last complete batch (or the fetch offset when
    /// no complete batch was returned).
    pub next_offset: i64,
    /// (producer id, offset) of each control batch (transaction marker) passed over.
    pub control_batches: Vec<(i64, i64)>,
}

/// Decodes the `records` bytes of one partition of a fetch response. A batch cut short at
/// the end (the broker stops at `max_bytes`) is ignored, as Kafka clients do; a batch that
/// is complete but corrupt (CRC, magic, codec) is an error.
pub fn decode_fetched(
    mut data: Bytes,
    partition: i32,
    fetch_offset: i64,
) -> Result<DecodedRecords> {
    let mut out = DecodedRecords {
        records: Vec::new(),
        next_offset: fetch_offset,
        control_batches: Vec::new(),
    };
    while data.len() >= crate::batch::HEADER_LEN {
        let header = BatchHeader::new(&data).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let total = header.total_size().ok_or_else(|| {
            ClientError::Protocol(format!("record batch length {}", header.batch_length()))
        })?;
        if total > data.len() {
            break;
        }
        let magic = header.magic();
        if magic != tidelog_records::MAGIC_V2 {
            return Err(ClientError::Protocol(format!(
                "record batch magic {magic} is not supported (only v2)"
            )));
        }
        let after = header.last_offset().saturating_add(1);
        let base = header.base_offset();
        let batch = data.split_to(total);
        let (records, control) = crate::batch::read_batch(batch, partition, fetch_offset)?;
        out.records.extend(records);
        if let Some(producer_id) = control {
            out.control_batches.push((producer_id, base));
        }
        out.next_offset = out.next_offset.max(after);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Buf, BytesMut};

    /// Byte positions inside a RecordBatch v2 header.
    const BATCH_LENGTH_AT: usize = 8;
    const LAST_OFFSET_DELTA_AT: usize = 23;
    /// baseOffset + batchLength: the part of the header not counted by batchLength.
    const LOG_OVERHEAD: usize = 12;

    fn be_i32(b: &[u8], at: usize) -> i32 {
        let mut s = &b[at..at + 4];
        s.get_i32()
    }

    fn be_i64(b: &[u8], at: usize) -> i64 {
        let mut s = &b[at..at + 8];
        s.get_i64()
    }

    fn sample(n: usize) -> Vec<ProduceRecord> {
        (0..n)
            .map(|i| ProduceRecord {
                key: (i % 3 != 0).then(|| Bytes::from(format!("key-{i}"))),
                value: Some(Bytes::from(format!("value-{i}").repeat(i % 5 + 1))),
                headers: vec![("h".into(), Some(Bytes::from(vec![i as u8, 0, 255])))],
                timestamp: Some(1_700_000_000_000 + i as i64 * 7),
            })
            .collect()
    }

    /// Simulates the broker assigning `base` as the batch's base offset.
    fn rebase(batch: &Bytes, base: i64) -> Bytes {
        let mut b = BytesMut::from(&batch[..]);
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b.freeze()
    }

    fn assert_same(sent: &[ProduceRecord], got: &[ConsumedRecord], base: i64) {
        assert_eq!(sent.len(), got.len());
        for (i, (s, g)) in sent.iter().zip(got).enumerate() {
            assert_eq!(g.offset, base + i as i64);
            assert_eq!(g.key, s.key);
            assert_eq!(g.value, s.value);
            assert_eq!(g.headers, s.headers);
            assert_eq!(Some(g.timestamp), s.timestamp);
            assert!(!g.log_append_time);
        }
    }

    #[test]
    fn batch_round_trips_for_every_codec() {
        let sent = sample(50);
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = encode_batch(&sent, codec, 0).unwrap();
            let decoded = decode_fetched(rebase(&batch, 1000), 4, 1000).unwrap();
            assert_same(&sent, &decoded.records, 1000);
            assert_eq!(decoded.next_offset, 1050);
            assert!(decoded.records.iter().all(|r| r.partition == 4));
        }
    }

    #[test]
    fn encoder_emits_exactly_one_batch_without_producer_id() {
        let batch = encode_batch(&sample(10), Compression::None, 0).unwrap();
        let declared = be_i32(&batch, BATCH_LENGTH_AT) as usize;
        assert_eq!(declared + LOG_OVERHEAD, batch.len());
        assert_eq!(be_i32(&batch, LAST_OFFSET_DELTA_AT), 9);
        assert_eq!(be_i64(&batch, 43), -1, "producer id");
        assert_eq!(be_i32(&batch, 53), -1, "base sequence");
        assert_eq!(be_i32(&batch, 57), 10, "record count");
    }

    #[test]
    fn missing_timestamp_becomes_now() {
        let rec = ProduceRecord::new(None, Some(Bytes::from_static(b"v")));
        let batch = encode_batch(&[rec], Compression::None, 123_456).unwrap();
        let got = decode_fetched(batch, 0, 0).unwrap();
        assert_eq!(got.records[0].timestamp, 123_456);
        assert_eq!(got.records[0].key, None);
    }

    #[test]
    fn skips_records_before_fetch_offset_and_a_truncated_tail() {
        let sent = sample(10);
        let first = rebase(&encode_batch(&sent, Compression::None, 0).unwrap(), 0);
        let second = rebase(&encode_batch(&sent, Compression::None, 0).unwrap(), 10);
        let mut joined = BytesMut::new();
        joined.extend_from_slice(&first);
        joined.extend_from_slice(&second[..second.len() - 5]);
        let got = decode_fetched(joined.freeze(), 0, 4).unwrap();
        assert_same(&sent[4..], &got.records, 4);
        assert_eq!(got.next_offset, 10);
    }

    #[test]
    fn corrupt_batch_is_an_error() {
        let batch = encode_batch(&sample(3), Compression::None, 0).unwrap();
        let mut bad = BytesMut::from(&batch[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(decode_fetched(bad.freeze(), 0, 0).is_err());
    }

    #[test]
    fn log_append_time_batches_report_the_max_timestamp() {
        let batch = encode_batch(&sample(3), Compression::None, 0).unwrap();
        let got = decode_fetched(patch_header(&batch, 1 << 3, Some(99)), 0, 0).unwrap();
        assert!(got
            .records
            .iter()
            .all(|r| r.timestamp == 99 && r.log_append_time));
    }

    /// Rewrites attributes / max timestamp of an encoded batch and fixes its CRC.
    fn patch_header(batch: &Bytes, set_attributes: i16, max_timestamp: Option<i64>) -> Bytes {
        let mut b = BytesMut::from(&batch[..]);
        b[22] |= set_attributes as u8;
        if let Some(ts) = max_timestamp {
            b[35..43].copy_from_slice(&ts.to_be_bytes());
        }
        tidelog_records::BatchHeaderMut::new(&mut b)
            .unwrap()
            .refresh_crc();
        b.freeze()
    }

    #[test]
    fn repeated_header_keys_are_kept_in_order() {
        let headers = vec![
            ("k".to_owned(), Some(Bytes::from_static(b"1"))),
            ("other".to_owned(), None),
            ("k".to_owned(), Some(Bytes::from_static(b"2"))),
        ];
        let rec = ProduceRecord {
            headers: headers.clone(),
            ..ProduceRecord::new(None, Some(Bytes::from_static(b"v")))
        };
        for codec in [Compression::None, Compression::Zstd] {
            let got = decode_fetched(
                encode_batch(std::slice::from_ref(&rec), codec, 5).unwrap(),
                0,
                0,
            )
            .unwrap();
            assert_eq!(got.records[0].headers, headers);
        }
    }

    #[test]
    fn the_codec_crate_reads_our_batches() {
        // An independent decoder: kafka-protocol's.
        let sent = sample(20);
        for codec in [Compression::None, Compression::Gzip, Compression::Lz4] {
            let mut batch = encode_batch(&sent, codec, 0).unwrap();
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut batch).unwrap();
            assert!(batch.is_empty());
            assert_eq!(set.compression, codec);
            assert_eq!(set.records.len(), 20);
            for (i, (s, r)) in sent.iter().zip(&set.records).enumerate() {
                assert_eq!(r.offset, i as i64);
                assert_eq!(r.key, s.key);
                assert_eq!(r.value, s.value);
                assert_eq!(Some(r.timestamp), s.timestamp);
                assert_eq!(r.producer_id, -1);
                let headers: Vec<_> = r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect();
                assert_eq!(headers, s.headers);
            }
        }
    }

    #[test]
    fn control_batches_are_skipped_but_advance_the_position() {
        let batch = rebase(&encode_batch(&sample(2), Compression::None, 0).unwrap(), 30);
        let control = patch_header(&batch, 1 << 5, None);
        let got = decode_fetched(control, 0, 30).unwrap();
        assert!(got.records.is_empty());
        assert_eq!(got.next_offset, 32);
        assert_eq!(got.control_batches, vec![(-1, 30)]);
    }

    #[test]
    fn empty_input_is_rejected() {
        assert!(encode_batch(&[], Compression::None, 0).is_err());
        assert_eq!(
            decode_fetched(Bytes::new(), 0, 7).unwrap(),
            DecodedRecords {
                records: vec![],
                next_offset: 7,
                control_batches: vec![],
            }
        );
    }
}
