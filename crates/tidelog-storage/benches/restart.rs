//! Restart cost of many partition logs: `cargo bench -p tidelog-storage --bench restart`.
//!
//! Fills `TIDELOG_BENCH_PARTITIONS` (default 1,000) logs with `TIDELOG_BENCH_KB` KiB each
//! (default 1,024: 1 GiB in all) of 64 KiB batches and checkpoints them, then measures:
//! 1. clean shutdown: `Log::close` of every log, one after another;
//! 2. clean open, one after another, then closing them again (nothing changed);
//! 3. clean open with `open_logs` on `TIDELOG_BENCH_THREADS` (default 8) threads;
//! 4. after a crash: 10 % more data appended to every log, which is then dropped without
//!    closing (kill -9: page cache intact, no clean-shutdown marker), then opened with
//!    `open_logs` (recovery scans the unflushed tail).
//!
//! Directory: `TIDELOG_BENCH_DIR` (default the system temp dir).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use tidelog_storage::{AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const OPTS: AppendOptions = AppendOptions {
    leader_epoch: 0,
    now_ms: 1_700_000_000_000,
    origin: AppendOrigin::Client,
};

fn template() -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..64u8 {
        b = b.kv(Some(&[i]), Some(&[i; 1024]), 1_700_000_000_000);
    }
    b.build().expect("batch")
}

fn append_kib(log: &mut Log, template: &[u8], kib: u64) {
    let batches = (kib * 1024).div_ceil(template.len() as u64).max(1);
    let mut buf = template.to_vec();
    for _ in 0..batches {
        buf.copy_from_slice(template);
        log.append(&mut buf, &OPTS).unwrap();
    }
}

fn dirs(root: &Path, n: u64) -> Vec<(PathBuf, LogConfig)> {
    (0..n)
        .map(|i| (root.join(format!("t-{i}")), LogConfig::default()))
        .collect()
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    println!("{what:<58} {:8.2} s", start.elapsed().as_secs_f64());
    out
}

fn main() {
    let root = std::env::var_os("TIDELOG_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::tempdir_in(root).unwrap();
    let partitions = env_num("TIDELOG_BENCH_PARTITIONS", 1000);
    let kib = env_num("TIDELOG_BENCH_KB", 1024);
    let threads = env_num("TIDELOG_BENCH_THREADS", 8) as usize;
    let template = template();
    let wanted = dirs(dir.path(), partitions);
    println!(
        "restart bench: {partitions} logs x {kib} KiB, {threads} open threads, dir {}",
        dir.path().display()
    );
    let logs: Vec<Log> = timed("create and fill (flush + checkpoints each)", || {
        wanted
            .iter()
            .map(|(d, c)| {
                let mut log = Log::open(d, c.clone()).unwrap();
                append_kib(&mut log, &template, kib);
                log.flush().unwrap();
                log
            })
            .collect()
    });
    timed("1. clean shutdown, sequential close", || {
        logs.into_iter().for_each(|l| l.close().unwrap())
    });
    let logs: Vec<Log> = timed("2. clean open, sequential", || {
        wanted
            .iter()
            .map(|(d, c)| Log::open(d, c.clone()).unwrap())
            .collect()
    });
    timed("   close again (nothing changed)", || {
        logs.into_iter().for_each(|l| l.close().unwrap())
    });
    let logs: Vec<Log> = timed("3. clean open, open_logs", || {
        tidelog_storage::open_logs(wanted.clone(), threads)
            .into_iter()
            .map(Result::unwrap)
            .collect()
    });
    timed("   append 10 % more to every log, then crash", || {
        for mut log in logs {
            append_kib(&mut log, &template, kib / 10);
            drop(log);
        }
    });
    let logs: Vec<Log> = timed("4. open after the crash, open_logs", || {
        tidelog_storage::open_logs(wanted.clone(), threads)
            .into_iter()
            .map(Result::unwrap)
            .collect()
    });
    let total: u64 = logs.iter().map(Log::size_bytes).sum();
    println!("   recovered {} MiB in all", total >> 20);
}
