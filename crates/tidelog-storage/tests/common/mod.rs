//! Helpers shared by the integration tests (included with `mod common;`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use tidelog_storage::{AppendOptions, AppendOrigin, BatchBuilder, BatchHeader, Log};

pub(crate) fn opts(now_ms: i64) -> AppendOptions {
    AppendOptions {
        leader_epoch: 0,
        now_ms,
        origin: AppendOrigin::Client,
    }
}

/// One batch per entry of `epochs`, appended as leader in that epoch (a leader change
/// between each pair of distinct values); `pad` sizes the records.
pub(crate) fn append_in_epochs(log: &mut Log, epochs: &[i32], pad: usize) {
    for (i, &epoch) in epochs.iter().enumerate() {
        let o = AppendOptions {
            leader_epoch: epoch,
            now_ms: i as i64,
            origin: AppendOrigin::Client,
        };
        log.append(&mut batch(2, 0, "e", pad), &o).unwrap();
    }
}

/// `n` records with keys `k<i>`, values `<tag>-<i>` padded to `pad` bytes, timestamps ts+i.
pub(crate) fn batch(n: usize, ts: i64, tag: &str, pad: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        let mut v = format!("{tag}-{i}").into_bytes();
        v.resize(v.len().max(pad), b'.');
        b = b.kv(Some(format!("k{i}").as_bytes()), Some(&v), ts + i as i64);
    }
    b.build().expect("non-empty batch")
}

/// Every batch of the log from `from`, re-read through `Log::read`, split by header.
pub(crate) fn read_all(log: &Log, from: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let r = log.read(next, 1 << 20, i64::MAX).unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_to_vec().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::new(&bytes[pos..]).unwrap();
            let size = h.total_size().unwrap();
            out.push(bytes[pos..pos + size].to_vec());
            next = h.last_offset() + 1;
            pos += size;
        }
    }
    out
}

pub(crate) fn base_offsets(batches: &[Vec<u8>]) -> Vec<i64> {
    batches
        .iter()
        .map(|b| BatchHeader::new(b).unwrap().base_offset())
        .collect()
}

pub(crate) fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// (offset, key, value, timestamp) of every record, decoded by the kafka-protocol crate.
pub(crate) type Decoded = (i64, Option<Vec<u8>>, Option<Vec<u8>>, i64);

pub(crate) fn decode_records(batches: &[Vec<u8>]) -> Vec<Decoded> {
    let mut out = Vec::new();
    for b in batches {
        let mut buf = bytes::Bytes::from(b.clone());
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
        for r in set.records {
            out.push((
                r.offset,
                r.key.map(|k| k.to_vec()),
                r.value.map(|v| v.to_vec()),
                r.timestamp,
            ));
        }
    }
    out
}
