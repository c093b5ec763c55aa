//! The high watermarks of this node's partitions, in one file per log directory
//! (`replication-offset-checkpoint`: Kafka's name, format and cadence, every
//! `replica.high.watermark.checkpoint.interval.ms` and at shutdown).
//!
//! One file costs one file and one directory fsync per directory and interval; a file
//! per partition cost two fsyncs for every partition whose high watermark moved, which
//! at 16,384 busy partitions kept the disk saturated with 65,000 fsyncs every 5 s.
//!
//! A high watermark read back is a lower bound the replicas move on from (clamped to
//! the log's end); one lost in a crash only makes consumers wait for replication to
//! move it again, which is why the file is written only now and then.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tidelog_storage::{DirClaim, Log};

use super::{Partition, PartitionKey};
use crate::poison::LockTolerant;

type Entries = Vec<(String, i32, i64)>;

#[derive(Default)]
pub(crate) struct HighWatermarkFiles {
    /// What each log directory's file held when this process first opened logs there
    /// (`None` until then); each entry is handed out once, to the log it belongs to.
    found: Mutex<Option<HashMap<PathBuf, HashMap<PartitionKey, i64>>>>,
    /// What was last written to each directory's file, so an unchanged one is not
    /// rewritten.
    written: Mutex<HashMap<PathBuf, Entries>>,
}

impl HighWatermarkFiles {
    /// Reads the files of `log_dirs` unless that was done already: before the first log
    /// opens, so no write can replace a file whose values some log has yet to take.
    /// Blocking file reads.
    pub(crate) fn load_once(&self, log_dirs: &[PathBuf]) {
        let mut found = self.found.locked();
        if found.is_none() {
            *found = Some(
                log_dirs
                    .iter()
                    .map(|dir| (dir.clone(), tidelog_storage::read_high_watermarks(dir)))
                    .collect(),
            );
        }
    }

    /// Gives a log just opened the high watermark its directory's file held for it, if
    /// its directory held this topic's data before (a created or replaced one starts
    /// empty, whatever an older file says about the name).
    pub(crate) fn restore(&self, key: &PartitionKey, log: &mut Log, claim: &DirClaim) {
        if !matches!(claim, DirClaim::Owned | DirClaim::Adopted) {
            return;
        }
        let Some(log_dir) = log.dir().parent() else {
            return;
        };
        let restored = self
            .found
            .locked()
            .as_mut()
            .and_then(|found| found.get_mut(log_dir))
            .and_then(|entries| entries.remove(key));
        if let Some(hw) = restored {
            log.set_high_watermark(hw);
        }
    }

    /// Writes the file of each log directory holding any of `partitions` (or whose file
    /// named a partition no longer there) when its content changed. Blocking file I/O;
    /// returns the directories whose write failed.
    pub(crate) fn write(&self, partitions: &[Arc<Partition>]) -> Vec<(PathBuf, std::io::Error)> {
        if self.found.locked().is_none() {
            return Vec::new(); // no log opened yet: the files still hold what they found
        }
        let mut by_dir: HashMap<PathBuf, Entries> = HashMap::new();
        for p in partitions {
            let located = p.with_log(|log| {
                Ok((
                    log.dir().parent().map(Path::to_path_buf),
                    log.high_watermark(),
                ))
            });
            if let Ok((Some(dir), hw)) = located {
                by_dir
                    .entry(dir)
                    .or_default()
                    .push((p.topic.clone(), p.index, hw));
            }
        }
        let mut written = self.written.locked();
        for (dir, entries) in written.iter() {
            if !entries.is_empty() && !by_dir.contains_key(dir) {
                by_dir.insert(dir.clone(), Vec::new());
            }
        }
        let mut failed = Vec::new();
        for (dir, mut entries) in by_dir {
            entries.sort_unstable();
            if written.get(&dir) == Some(&entries) {
                continue;
            }
            match tidelog_storage::write_high_watermarks(&dir, &entries) {
                Ok(()) => {
                    written.insert(dir, entries);
                }
                Err(e) => failed.push((dir, e)),
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_storage::{BatchBuilder, LogConfig};
    use uuid::Uuid;

    const FILE: &str = "replication-offset-checkpoint";

    /// A partition of `records` records, all below its high watermark.
    fn partition(log_dir: &Path, topic: &str, index: i32, records: usize) -> Arc<Partition> {
        let dir = log_dir.join(format!("{topic}-{index}"));
        let log = Log::open(&dir, LogConfig::default()).expect("open");
        let p = Partition::new(topic.into(), Uuid::nil(), index, 0, log);
        for i in 0..records {
            let mut batch = BatchBuilder::new()
                .kv(None, Some(format!("v{i}").as_bytes()), 1000)
                .build()
                .expect("batch");
            p.append(&mut batch, 1000).expect("append");
        }
        Arc::new(p)
    }

    fn set_hw(p: &Partition, hw: i64) {
        p.with_log(|log| {
            log.set_high_watermark(hw);
            Ok(())
        })
        .expect("set");
    }

    fn reopen(p: &Partition) -> Log {
        let log = p.take_log().expect("open log");
        let dir = log.dir().to_path_buf();
        log.close().expect("close");
        Log::open(&dir, LogConfig::default()).expect("reopen")
    }

    #[test]
    fn high_watermarks_come_back_from_one_file_per_log_directory() {
        let dir = tempfile::tempdir().unwrap();
        let files = HighWatermarkFiles::default();
        files.load_once(&[dir.path().to_path_buf()]);
        let a = partition(dir.path(), "orders", 0, 5);
        let b = partition(dir.path(), "orders", 1, 3);
        set_hw(&a, 4);
        assert!(files.write(&[a.clone(), b.clone()]).is_empty());
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, "0\n2\norders 0 4\norders 1 3\n");

        // Unchanged: not rewritten (a file deleted meanwhile stays deleted).
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        assert!(files.write(&[a.clone(), b.clone()]).is_empty());
        assert!(!dir.path().join(FILE).exists());
        set_hw(&a, 5);
        assert!(files.write(&[a.clone(), b.clone()]).is_empty());

        // A restart: only logs whose directory held the topic's data take their value.
        let restarted = HighWatermarkFiles::default();
        restarted.load_once(&[dir.path().to_path_buf()]);
        let mut log = reopen(&a);
        assert_eq!(log.high_watermark(), 0);
        restarted.restore(&("orders".into(), 0), &mut log, &DirClaim::Owned);
        assert_eq!(log.high_watermark(), 5);
        let mut log = reopen(&b);
        restarted.restore(&("orders".into(), 1), &mut log, &DirClaim::Created);
        assert_eq!(log.high_watermark(), 0, "a fresh directory takes nothing");
        restarted.restore(&("orders".into(), 1), &mut log, &DirClaim::Owned);
        assert_eq!(log.high_watermark(), 3);
        log.set_high_watermark(1);
        restarted.restore(&("orders".into(), 1), &mut log, &DirClaim::Owned);
        assert_eq!(log.high_watermark(), 1, "each value is handed out once");
    }

    #[test]
    fn nothing_is_written_before_the_files_were_read() {
        let dir = tempfile::tempdir().unwrap();
        let earlier = "0\n1\norders 0 7\n";
        std::fs::write(dir.path().join(FILE), earlier).unwrap();
        let files = HighWatermarkFiles::default();
        let a = partition(dir.path(), "other", 0, 1);
        assert!(files.write(&[a]).is_empty());
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, earlier);
    }

    #[test]
    fn a_directory_left_without_partitions_gets_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let files = HighWatermarkFiles::default();
        files.load_once(&[dir.path().to_path_buf()]);
        let a = partition(dir.path(), "orders", 0, 2);
        assert!(files.write(&[a]).is_empty());
        assert!(files.write(&[]).is_empty());
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, "0\n0\n");
    }
}
