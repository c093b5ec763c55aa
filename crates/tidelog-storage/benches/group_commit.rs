//! Group commit: `cargo bench -p tidelog-storage --bench group_commit`.
//!
//! One log with `flush.messages=1`, small batches (one 1 KiB record). Three runs, each
//! for `TIDELOG_BENCH_SECS` seconds (default 3) in `TIDELOG_BENCH_DIR` (default the
//! system temp dir):
//! 1. one writer, `Log::append` (fdatasync inside the append): the single-writer fsync rate;
//! 2. `TIDELOG_BENCH_THREADS` (default 16) threads sharing the log behind a `Mutex`, each
//!    calling `Log::append` under the lock (the sync is inside the lock): the old shape;
//! 3. the same threads calling `Log::append_group_commit` under the lock and
//!    `PendingSync::wait` after releasing it.
//!
//! Prints acknowledged appends/s, fdatasyncs, and the ratio to run 1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidelog_storage::{AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn small_batch() -> Vec<u8> {
    let value = vec![b'v'; 1024];
    BatchBuilder::new()
        .kv(Some(b"key"), Some(&value), 1_700_000_000_000)
        .build()
        .expect("batch")
}

const OPTS: AppendOptions = AppendOptions {
    leader_epoch: 0,
    now_ms: 1_700_000_000_000,
    origin: AppendOrigin::Client,
};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    SyncUnderLock,
    GroupCommit,
}

/// Returns (acknowledged appends, fdatasyncs made by waiters, seconds).
fn run(dir: &Path, threads: usize, mode: Mode, secs: u64) -> (u64, u64, f64) {
    let config = LogConfig {
        flush_messages: 1,
        ..LogConfig::default()
    };
    let log = Arc::new(Mutex::new(Log::open(dir, config).unwrap()));
    let durability = log.lock().unwrap().durability();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let template = small_batch();
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (log, stop, acked) = (Arc::clone(&log), Arc::clone(&stop), Arc::clone(&acked));
            let template = template.clone();
            std::thread::spawn(move || {
                let mut buf = template.clone();
                while !stop.load(Ordering::Relaxed) {
                    buf.copy_from_slice(&template);
                    match mode {
                        Mode::SyncUnderLock => {
                            log.lock().unwrap().append(&mut buf, &OPTS).unwrap();
                        }
                        Mode::GroupCommit => {
                            let (_, pending) = log
                                .lock()
                                .unwrap()
                                .append_group_commit(&mut buf, &OPTS)
                                .unwrap();
                            if let Some(p) = pending {
                                p.wait().unwrap();
                            }
                        }
                    }
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let syncs = durability.sync_count();
    Arc::try_unwrap(log)
        .ok()
        .unwrap()
        .into_inner()
        .unwrap()
        .delete()
        .unwrap();
    (acked.load(Ordering::Relaxed), syncs, elapsed)
}

fn main() {
    let root = std::env::var_os("TIDELOG_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::tempdir_in(root).unwrap();
    let secs = env_num("TIDELOG_BENCH_SECS", 3);
    let threads = env_num("TIDELOG_BENCH_THREADS", 16) as usize;
    println!(
        "group commit bench: flush.messages=1, 1 x 1 KiB record per append, {secs} s per run, dir {}",
        dir.path().display()
    );
    let (n, _, s) = run(&dir.path().join("single"), 1, Mode::SyncUnderLock, secs);
    let single = n as f64 / s;
    println!("1 writer, sync inside append:          {single:9.0} appends/s (the fsync rate)");
    let (n, _, s) = run(
        &dir.path().join("locked"),
        threads,
        Mode::SyncUnderLock,
        secs,
    );
    let locked = n as f64 / s;
    println!(
        "{threads} writers, sync under the lock:      {locked:9.0} appends/s   {:.2} x single",
        locked / single
    );
    let (n, syncs, s) = run(&dir.path().join("group"), threads, Mode::GroupCommit, secs);
    let group = n as f64 / s;
    println!(
        "{threads} writers, group commit:             {group:9.0} appends/s   {:.2} x single   {syncs} fdatasyncs for {n} appends ({:.1} appends per sync)",
        group / single,
        n as f64 / syncs.max(1) as f64
    );
}
