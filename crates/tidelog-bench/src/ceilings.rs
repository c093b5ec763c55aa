//! This machine's ceilings, measured in the same run as the broker figures they bound:
//! loopback TCP (one stream, own sender and receiver), loopback round trip, buffered
//! sequential write, and append + fdatasync on the data directory's filesystem.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::stats::{mb_per_s, percentile_us};

/// How much work each ceiling does; `quick` suits a smoke run.
#[derive(Clone, Debug)]
pub(crate) struct CeilingSizes {
    pub(crate) tcp_duration: Duration,
    pub(crate) rtt_rounds: usize,
    pub(crate) buffered_write_bytes: u64,
    pub(crate) fsync_4k_rounds: usize,
    pub(crate) fsync_1m_rounds: usize,
}

impl CeilingSizes {
    pub(crate) fn full() -> Self {
        Self {
            tcp_duration: Duration::from_secs(3),
            rtt_rounds: 20_000,
            buffered_write_bytes: 1 << 30,
            fsync_4k_rounds: 500,
            fsync_1m_rounds: 128,
        }
    }

    pub(crate) fn quick() -> Self {
        Self {
            tcp_duration: Duration::from_millis(300),
            rtt_rounds: 1_000,
            buffered_write_bytes: 32 << 20,
            fsync_4k_rounds: 20,
            fsync_1m_rounds: 8,
        }
    }
}

/// The measured ceilings. Throughputs in MB/s (10^6 bytes), latencies in microseconds.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Ceilings {
    pub(crate) loopback_tcp_mb_s: f64,
    pub(crate) loopback_rtt_us: f64,
    pub(crate) buffered_write_mb_s: f64,
    pub(crate) fsync_4k_p50_us: f64,
    pub(crate) fsync_4k_p99_us: f64,
    /// One writer appending 4 KiB and fdatasyncing each time: syncs per second.
    pub(crate) fsync_4k_per_s: f64,
    pub(crate) fsync_1m_mb_s: f64,
}

/// Measures every ceiling; disk figures use a scratch file inside `dir`.
pub(crate) fn measure(dir: &Path, sizes: &CeilingSizes) -> anyhow::Result<Ceilings> {
    let loopback_tcp_mb_s = loopback_throughput(sizes.tcp_duration)?;
    let loopback_rtt_us = loopback_round_trip(sizes.rtt_rounds)?;
    let scratch = tempfile::Builder::new()
        .prefix("tidelog-bench-ceiling")
        .tempdir_in(dir)
        .with_context(|| format!("scratch dir in {}", dir.display()))?;
    write_back_dirty_pages(dir);
    let buffered_write_mb_s =
        buffered_write(&scratch.path().join("seq"), sizes.buffered_write_bytes)?;
    let mut sync_4k = append_and_sync(&scratch.path().join("sync4k"), 4096, sizes.fsync_4k_rounds)?;
    sync_4k.sort_unstable();
    let fsync_4k_p50_us = percentile_us(&sync_4k, 50.0);
    let fsync_4k_p99_us = percentile_us(&sync_4k, 99.0);
    let total_4k: Duration = sync_4k.iter().sum();
    let fsync_4k_per_s = sync_4k.len() as f64 / total_4k.as_secs_f64().max(1e-9);
    let sync_1m = append_and_sync(
        &scratch.path().join("sync1m"),
        1 << 20,
        sizes.fsync_1m_rounds,
    )?;
    let total_1m: Duration = sync_1m.iter().sum();
    let fsync_1m_mb_s = mb_per_s((sync_1m.len() as u64) << 20, total_1m);
    Ok(Ceilings {
        loopback_tcp_mb_s,
        loopback_rtt_us,
        buffered_write_mb_s,
        fsync_4k_p50_us,
        fsync_4k_p99_us,
        fsync_4k_per_s,
        fsync_1m_mb_s,
    })
}

/// One TCP stream over loopback: a sender thread writes 256 KiB chunks for `duration`;
/// the rate is what the receiver read over the time it took.
fn loopback_throughput(duration: Duration) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let sender = thread::spawn(move || -> std::io::Result<()> {
        let mut stream = TcpStream::connect(addr)?;
        let chunk = vec![0x5au8; 256 * 1024];
        let start = Instant::now();
        while start.elapsed() < duration {
            stream.write_all(&chunk)?;
        }
        Ok(())
    });
    let (mut stream, _) = listener.accept()?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut received = 0u64;
    let start = Instant::now();
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        received += n as u64;
    }
    let elapsed = start.elapsed();
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("loopback sender thread panicked"))??;
    Ok(mb_per_s(received, elapsed))
}

/// Median round trip of a 64-byte ping-pong over one loopback connection (Nagle off).
fn loopback_round_trip(rounds: usize) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buf = [0u8; 64];
        loop {
            match stream.read_exact(&mut buf) {
                Ok(()) => stream.write_all(&buf)?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = [7u8; 64];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        stream.write_all(&buf)?;
        stream.read_exact(&mut buf)?;
        samples.push(start.elapsed());
    }
    drop(stream);
    echo.join()
        .map_err(|_| anyhow::anyhow!("loopback echo thread panicked"))??;
    samples.sort_unstable();
    Ok(percentile_us(&samples, 50.0))
}

/// Writes back what others left dirty on `dir`'s filesystem (`sync -f`; skipped where the
/// command is missing). Measured right after a build has written gigabytes, the buffered
/// write would otherwise be throttled to the disk's writeback speed.
fn write_back_dirty_pages(dir: &Path) {
    let _ = std::process::Command::new("sync")
        .arg("-f")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Sequential 1 MiB writes into the page cache, no sync: the disk path's best case.
/// The first pass is a warm-up and only the second is reported: on a VM whose free
/// memory goes back to the host (virtio balloon free page reporting, as here), the first
/// write into long-free pages faults every page in from the host and runs at 400-500
/// MB/s, while the same 1 GiB written again into the pages just freed runs at 3-4 GB/s.
/// The broker's runs recycle the pages of the runs deleted before them, like the second.
fn buffered_write(path: &Path, bytes: u64) -> anyhow::Result<f64> {
    buffered_write_pass(path, bytes)?;
    buffered_write_pass(path, bytes)
}

fn buffered_write_pass(path: &Path, bytes: u64) -> anyhow::Result<f64> {
    let mut file = File::create(path)?;
    let chunk = vec![0xa5u8; 1 << 20];
    let chunks = (bytes >> 20).max(1);
    let start = Instant::now();
    for _ in 0..chunks {
        file.write_all(&chunk)?;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(path)?;
    Ok(mb_per_s(chunks << 20, elapsed))
}

/// Appends `size` bytes then fdatasyncs, `rounds` times; returns each round's time.
fn append_and_sync(path: &Path, size: usize, rounds: usize) -> anyhow::Result<Vec<Duration>> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let block = vec![0x3cu8; size];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(path)?;
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_ceilings_are_positive_and_ordered() {
        let dir = tempfile::tempdir().unwrap();
        let c = measure(dir.path(), &CeilingSizes::quick()).unwrap();
        assert!(c.loopback_tcp_mb_s > 1.0, "{c:?}");
        assert!(
            c.loopback_rtt_us > 0.0 && c.loopback_rtt_us < 100_000.0,
            "{c:?}"
        );
        assert!(c.buffered_write_mb_s > 1.0, "{c:?}");
        assert!(
            c.fsync_4k_p50_us > 0.0 && c.fsync_4k_p99_us >= c.fsync_4k_p50_us,
            "{c:?}"
        );
        assert!(c.fsync_1m_mb_s > 0.0, "{c:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "scratch removed"
        );
    }
}
