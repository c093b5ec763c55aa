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
