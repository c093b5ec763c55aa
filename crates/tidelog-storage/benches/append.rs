//! Storage engine throughput: `cargo bench -p tidelog-storage --bench append`.
//!
//! Appends 64 KiB batches of 1 KiB records and compares with a plain `write()` loop of
//! the same buffers to the same disk in the same run; then measures the fetch path
//! (`Log::read` + pread of the slice) from page cache; then fsync-per-batch durability
//! (`flush.messages=1`) against `write()+fdatasync()`. Sizes: `TIDELOG_BENCH_MB` (default
//! 256) and `TIDELOG_BENCH_SYNC_MB` (default 8); directory: `TIDELOG_BENCH_DIR` (default
//! the system temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tidelog_storage::{AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig};

const BATCH_RECORDS: usize = 64;
const RECORD_BYTES: usize = 1024;
const ROUNDS: usize = 7;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_mb(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn template() -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..BATCH_RECORDS {
        let value: Vec<u8> = (0..RECORD_BYTES).map(|j| (i * 31 + j) as u8).collect();
        b = b.kv(
            Some(format!("key-{i}").as_bytes()),
            Some(&value),
            1_700_000_000_000,
        );
    }
    b.build().expect("batch")
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

fn plain_write(dir: &Path, batch: &[u8], batches: u64, sync_each: bool) -> f64 {
    let path = dir.join("plain.bin");
    let mut f = File::create(&path).unwrap();
    let mut buf = batch.to_vec();
    let start = Instant::now();
    for _ in 0..batches {
        // Same per-batch copy the log append does, so only the engine differs.
        buf.copy_from_slice(batch);
        f.write_all(&buf).unwrap();
        if sync_each {
            f.sync_data().unwrap();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(path).unwrap();
    mbps(batches * batch.len() as u64, secs)
}

fn log_append(dir: &Path, batch: &[u8], batches: u64, config: LogConfig) -> (f64, Log) {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("log-{run}"));
    let mut log = Log::open(&path, config).unwrap();
    let mut buf = batch.to_vec();
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 1_700_000_000_000,
        origin: AppendOrigin::Client,
    };
    let start = Instant::now();
    for _ in 0..batches {
        buf.copy_from_slice(batch);
        log.append(&mut buf, &opts).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    (mbps(batches * batch.len() as u64, secs), log)
}

fn fetch(log: &Log) -> f64 {
    let mut offset = log.log_start_offset();
    let mut bytes = 0u64;
    let start = Instant::now();
    while let Some(slice) = log.read(offset, 1 << 20, i64::MAX).unwrap().slice {
        let data = slice.read_to_vec().unwrap();
        bytes += data.len() as u64;
        let last =
            tidelog_storage::BatchHeader::new(&data[data.len() - slice_last_len(&data)..]).unwrap();
        offset = last.last_offset() + 1;
    }
    mbps(bytes, start.elapsed().as_secs_f64())
}

/// Length of the last batch in a buffer of whole batches.
fn slice_last_len(data: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        let size = tidelog_storage::BatchHeader::new(&data[pos..])
            .unwrap()
            .total_size()
            .unwrap();
        if pos + size == data.len() {
            return size;
        }
        pos += size;
    }
}

fn main() {
    let root = std::env::var_os("TIDELOG_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::tempdir_in(root).unwrap();
    let dir_path = dir.path().to_path_buf();
    let batch = template();
    let total_mb = env_mb("TIDELOG_BENCH_MB", 256);
    let batches = total_mb * (1 << 20) / batch.len() as u64;
    println!(
        "storage bench: {} batches of {} bytes ({} x {} B records), dir {}",
        batches,
        batch.len(),
        BATCH_RECORDS,
        RECORD_BYTES,
        dir_path.display()
    );

    let mut plain = Vec::new();
    let mut appended = Vec::new();
    let mut ratios = Vec::new();
    let mut last_log = None;
    for round in 0..ROUNDS {
        let p = plain_write(&dir_path, &batch, batches, false);
        let (l, log) = log_append(&dir_path, &batch, batches, LogConfig::default());
        println!(
            "round {round}: plain write {p:8.1} MB/s   log append {l:8.1} MB/s   ratio {:.2}",
            l / p
        );
        plain.push(p);
        appended.push(l);
        ratios.push(l / p);
        if let Some(old) = last_log.replace(log) {
            old.delete().unwrap();
        }
    }
    println!(
        "median:  plain write {:8.1} MB/s   log append {:8.1} MB/s   ratio of medians {:.2}   median ratio {:.2}",
        median(&mut plain),
        median(&mut appended),
        median(&mut appended.clone()) / median(&mut plain.clone()),
        median(&mut ratios)
    );
    if let Some(log) = last_log {
        let _ = fetch(&log); // warm
        let r = fetch(&log);
        println!("fetch (read + pread, page cache, 1 MiB max_bytes): {r:8.1} MB/s");
        log.delete().unwrap();
    }

    let sync_mb = env_mb("TIDELOG_BENCH_SYNC_MB", 8);
    let sync_batches = (sync_mb * (1 << 20) / batch.len() as u64).max(1);
    let p = plain_write(&dir_path, &batch, sync_batches, true);
    let cfg = LogConfig {
        flush_messages: 1,
        ..LogConfig::default()
    };
    let (l, log) = log_append(&dir_path, &batch, sync_batches, cfg);
    log.delete().unwrap();
    println!("fsync every batch: write+fdatasync {p:8.1} MB/s   log (flush.messages=1) {l:8.1} MB/s   ratio {:.2}",
        l / p);
}
