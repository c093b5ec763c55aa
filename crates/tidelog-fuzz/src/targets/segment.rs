//! Recovery of a partition whose only segment holds arbitrary bytes (a torn write, a
//! disk that returned garbage, a file from elsewhere): the first two input bytes say how
//! many of the rest form the offset index, the others are the log file. Opening must
//! either refuse with an error or give a log that serves only whole batches with valid
//! CRCs, at increasing offsets, up to its log end; that takes an append; and a reopen
//! (after a crash: no clean-shutdown marker) finds the appended record.

use std::os::unix::fs::FileExt;

use tidelog_records::{check_batch, BatchBuilder, BatchHeader};
use tidelog_storage::{AppendOptions, AppendOrigin, Log, LogConfig};

/// More reads than this for one log is a loop that does not advance.
const MAX_READS: usize = 10_000;

pub(super) fn run(data: &[u8]) {
    let (index, log) = match data {
        [a, b, rest @ ..] => {
            rest.split_at(usize::from(u16::from_be_bytes([*a, *b])).min(rest.len()))
        }
        _ => (&[][..], data),
    };
    let Ok(dir) = scratch_dir() else {
        return; // the machine, not the input
    };
    let name = "00000000000000000000";
    if std::fs::write(dir.path().join(format!("{name}.log")), log).is_err()
        || (!index.is_empty()
            && std::fs::write(dir.path().join(format!("{name}.index")), index).is_err())
    {
        return;
    }
    let config = LogConfig {
        segment_bytes: 1 << 20,
        segment_index_bytes: 4096,
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    let Ok(mut opened) = Log::open(dir.path(), config.clone()) else {
        return;
    };
    let end = serves_whole_batches(&opened);
    let mut batch = BatchBuilder::new()
        .kv(Some(b"key"), Some(b"after recovery"), 1)
        .build()
        .unwrap_or_else(|| panic!("a one-record batch does not build"));
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 1,
        origin: AppendOrigin::Client,
    };
    opened
        .append(&mut batch, &opts)
        .unwrap_or_else(|e| panic!("a recovered log refuses an append at {end}: {e}"));
    assert_eq!(opened.log_end_offset(), end + 1, "log end after one append");
    drop(opened);
    let reopened = Log::open(dir.path(), config)
        .unwrap_or_else(|e| panic!("the recovered log does not reopen after an append: {e}"));
    assert_eq!(reopened.log_end_offset(), end + 1, "log end after a reopen");
    serves_whole_batches(&reopened);
}

/// A directory for one input, in memory where the machine has /dev/shm: recovery
/// syncs files, and a sync to disk per input would make the target crawl.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return Ok(dir);
        }
    }
    tempfile::tempdir()
}

/// Reads the log from its start to its end; returns the end.
fn serves_whole_batches(log: &Log) -> i64 {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start {start} above log end {end}");
    let mut next = start;
    for _ in 0..MAX_READS {
        if next >= end {
            return end;
        }
        let read = log
            .read(next, 1 << 20, i64::MAX)
            .unwrap_or_else(|e| panic!("read at {next} (log {start}..{end}): {e}"));
        let Some(slice) = read.slice else {
            panic!("nothing served at {next} below the log end {end}");
        };
        let len = usize::try_from(slice.len).unwrap_or(usize::MAX);
        let mut bytes = vec![0u8; len];
        slice
            .file
            .read_exact_at(&mut bytes, slice.position)
            .unwrap_or_else(|e| panic!("reading the served slice: {e}"));
        let mut at = 0;
        while at < bytes.len() {
            let size = check_batch(&bytes[at..]).unwrap_or_else(|e| {
                panic!("served a bad batch at byte {at} of a read at {next}: {e}")
            });
            let header = BatchHeader::new(&bytes[at..at + size])
                .unwrap_or_else(|e| panic!("served batch header: {e}"));
            assert!(
                header.last_offset() >= next,
                "served batch {}..={} below the asked offset {next}",
                header.base_offset(),
                header.last_offset()
            );
            next = header.last_offset() + 1;
            at += size;
        }
    }
    panic!("reading {start}..{end} did not finish in {MAX_READS} reads");
}
