//! Client bytes and disk contents are untrusted: nothing here may panic, allocate without
//! bound, or change the log when rejected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use proptest::prelude::*;
use tidelog_storage::{BatchHeader, Log, LogConfig, StorageError};

use common::{batch, opts};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A valid batch with bytes overwritten (the CRC is repaired half of the time, so the
    /// structural checks behind it are reached too) is either appended whole or rejected
    /// with nothing written.
    #[test]
    fn mutated_produce_requests_are_all_or_nothing(
        edits in prop::collection::vec((any::<u16>(), any::<u8>()), 1..6),
        fix_crc in any::<bool>(),
        truncate in prop::option::of(any::<u16>()),
    ) {
        let dir = shm_dir();
        let cfg = LogConfig { max_message_bytes: 4000, ..LogConfig::default() };
        let mut log = Log::open(dir.path(), cfg).unwrap();
        log.append(&mut batch(2, 0, "pre", 10), &opts(0)).unwrap();
        let mut b = batch(3, 5, "m", 40);
        b.extend_from_slice(&batch(2, 9, "n", 5));
        for (at, v) in edits {
            let i = usize::from(at) % b.len();
            b[i] = v;
        }
        if let Some(t) = truncate {
            b.truncate(usize::from(t) % (b.len() + 1));
        }
        if fix_crc && b.len() >= 61 {
            let crc = crc32c::crc32c(&b[21..BatchHeader::new(&b).unwrap().total_size().unwrap_or(b.len()).min(b.len())]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let (end, size) = (log.log_end_offset(), log.size_bytes());
        match log.append(&mut b, &opts(1)) {
            Ok(info) => {
                prop_assert_eq!(info.first_offset, end);
                prop_assert_eq!(log.size_bytes(), size + b.len() as u64);
            }
            Err(e) => {
                prop_assert!(matches!(
                    e,
                    StorageError::CorruptMessage(_)
                        | StorageError::InvalidRecord(_)
                        | StorageError::MessageTooLarge { .. }
                ), "{}", e);
                prop_assert_eq!(log.log_end_offset(), end);
                prop_assert_eq!(log.size_bytes(), size);
            }
        }
    }

    /// Garbage in any file of a partition directory never panics the open or the reads;
    /// after an unclean shutdown, nothing served from the recovered (active) segment
    /// fails its CRC.
    #[test]
    fn garbage_files_never_panic_and_bad_batches_are_never_served(
        which in 0usize..9,
        garbage in prop::collection::vec(any::<u8>(), 0..300),
        at in any::<u16>(),
        clean in any::<bool>(),
    ) {
        let dir = shm_dir();
        let cfg = LogConfig { segment_bytes: 800, index_interval_bytes: 50, ..LogConfig::default() };
        let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
        for i in 0..12 {
            log.append(&mut batch(2, i, "g", 60), &opts(i)).unwrap();
        }
        if clean { log.close().unwrap(); } else { drop(log); }
        let mut files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let names = ["log", "index", "timeindex", "snapshot", "checkpoint", "log", "index", "log", "timeindex"];
        let ext = names[which];
        let targets: Vec<_> = files.iter().filter(|p| p.to_string_lossy().contains(ext)).collect();
        if let Some(target) = targets.get(usize::from(at) % targets.len().max(1)) {
            let mut bytes = std::fs::read(target).unwrap();
            let pos = usize::from(at) % (bytes.len() + 1);
            bytes.splice(pos..(pos + garbage.len()).min(bytes.len()), garbage.iter().copied());
            std::fs::write(target, bytes).unwrap();
        }
        if let Ok(log) = Log::open(dir.path(), cfg) {
            let recovered_from = if clean { i64::MAX } else { *log.segment_base_offsets().last().unwrap() };
            let mut next = log.log_start_offset();
            // Reads may fail (corruption below the recovery point is reported, not
            // repaired), but what they return must be whole, CRC-valid batches.
            while let Ok(r) = log.read(next, 1 << 16, i64::MAX) {
                let Some(slice) = r.slice else { break };
                let bytes = slice.read_to_vec().unwrap();
                let mut pos = 0;
                let mut last = next;
                while pos < bytes.len() {
                    let h = BatchHeader::new(&bytes[pos..]).unwrap();
                    let size = h.total_size().unwrap();
                    if h.base_offset() >= recovered_from {
                        prop_assert_eq!(crc32c::crc32c(&bytes[pos + 21..pos + size]), h.crc());
                    }
                    last = h.last_offset() + 1;
                    pos += size;
                }
                if last <= next { break; }
                next = last;
            }
            let _ = log.offset_for_timestamp(5);
        }
    }
}
