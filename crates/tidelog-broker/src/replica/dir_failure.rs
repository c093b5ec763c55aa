//! A log directory whose disk failed stops the node (Kafka's log-directory failure
//! channel, as a KRaft broker without KIP-858's directory assignment uses it).
//!
//! After an I/O error, a full disk or a failed fsync, what a log holds on disk is no
//! longer known, and a partition that keeps being served answers its producers with a
//! storage error for one batch and an out-of-order sequence for the next, which
//! librdkafka answers by bumping its epoch (and then may write a value twice). Kafka
//! instead takes the directory offline; a broker that cannot move single directories'
//! partitions elsewhere halts, the controller fences it once its heartbeats stop, and
//! its partitions get leaders on the other replicas. Its producers' in-flight requests
//! are retried there with their sequence numbers. At the restart, recovery checks every
//! log that was not closed cleanly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tidelog_storage::{FlushFailureObserver, StorageError};
use tokio::sync::watch;

/// The first log directory that failed on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirFailure {
    /// The log directory (an entry of `log.dirs`).
    pub log_dir: PathBuf,
    /// The partition directory or file where it was seen.
    pub seen_at: PathBuf,
    /// What the operating system said.
    pub error: String,
}

impl std::fmt::Display for LogDirFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "log directory {} failed ({}: {})",
            self.log_dir.display(),
            self.seen_at.display(),
            self.error
        )
    }
}

/// Where every part of the broker that touches a log reports its storage errors.
pub(crate) struct LogDirFailures {
    /// `log.dirs` as configured, each with its canonical form (a file a descriptor
    /// names is reported by its absolute path), to name the directory a path lies in.
    log_dirs: Vec<(PathBuf, PathBuf)>,
    failed: watch::Sender<Option<LogDirFailure>>,
}

impl LogDirFailures {
    pub(crate) fn new(log_dirs: Vec<PathBuf>) -> Self {
        let log_dirs = log_dirs
            .into_iter()
            .map(|dir| {
                let canonical = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
                (dir, canonical)
            })
            .collect();
        LogDirFailures {
            log_dirs,
            failed: watch::channel(None).0,
        }
    }

    /// The entry of `log.dirs` holding `path`: the deepest that contains it.
    fn log_dir_of(&self, path: &Path) -> Option<&PathBuf> {
        self.log_dirs
            .iter()
            .filter_map(|(dir, canonical)| {
                [dir, canonical]
                    .into_iter()
                    .filter(|d| path.starts_with(d))
                    .map(|d| d.components().count())
                    .max()
                    .map(|depth| (depth, dir))
            })
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, dir)| dir)
    }

    /// Notes `err`, seen on `path` (a partition directory or a file in a log
    /// directory), if it says the disk failed; returns whether it did. Only the first
    /// failure is kept: the node is stopping.
    pub(crate) fn report(&self, path: &Path, err: &StorageError) -> bool {
        if !err.is_disk_failure() {
            return false;
        }
        let log_dir = self
            .log_dir_of(path)
            .cloned()
            .unwrap_or_else(|| path.parent().unwrap_or(path).to_path_buf());
        let failure = LogDirFailure {
            log_dir,
            seen_at: path.to_path_buf(),
            error: err.to_string(),
        };
        self.failed.send_if_modified(|first| {
            if first.is_some() {
                return false;
            }
            tracing::error!(
                log_dir = %failure.log_dir.display(),
                seen_at = %failure.seen_at.display(),
                error = %failure.error,
                "log directory failed"
            );
            *first = Some(failure);
            true
        });
        true
    }

    /// For the storage engine: tells `failures` of every failed sync pass.
    pub(crate) fn observer(self: &Arc<Self>) -> FlushFailureObserver {
        let failures = Arc::clone(self);
        Arc::new(move |dir, err| {
            failures.report(dir, err);
        })
    }

    /// Resolves with the first log directory that fails.
    pub(crate) async fn first(&self) -> LogDirFailure {
        let mut rx = self.failed.subscribe();
        // The sender lives as long as `self`, so the wait ends only with a failure.
        if let Ok(seen) = rx.wait_for(Option::is_some).await {
            if let Some(failure) = seen.clone() {
                return failure;
            }
        }
        std::future::pending().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::time::Duration;

    fn eio() -> StorageError {
        StorageError::Io(io::Error::from_raw_os_error(libc::EIO))
    }

    #[tokio::test]
    async fn the_first_disk_failure_names_its_log_directory() {
        let failures = LogDirFailures::new(vec!["/disk1".into(), "/disk2".into()]);
        let waiting = tokio::time::timeout(Duration::from_millis(50), failures.first()).await;
        assert!(waiting.is_err(), "nothing failed yet");

        let closed = StorageError::Io(io::Error::other("log is closed"));
        assert!(!failures.report(Path::new("/disk1/orders-0"), &closed));
        assert!(!failures.report(
            Path::new("/disk1/orders-0"),
            &StorageError::CorruptMessage("bad crc".into())
        ));

        assert!(failures.report(Path::new("/disk2/orders-1"), &eio()));
        assert!(failures.report(Path::new("/disk1/orders-0"), &eio()));
        let first = tokio::time::timeout(Duration::from_secs(5), failures.first())
            .await
            .expect("a failure was reported");
        assert_eq!(first.log_dir, Path::new("/disk2"));
        assert_eq!(first.seen_at, Path::new("/disk2/orders-1"));
        assert!(first.to_string().contains("os error 5"), "{first}");
    }

    #[test]
    fn a_file_named_by_its_absolute_path_is_found_in_a_relative_log_dir() {
        let root = tempfile::tempdir().expect("tempdir");
        let disk = root.path().join("disk");
        std::fs::create_dir_all(disk.join("orders-0")).expect("mkdir");
        let cwd = std::env::current_dir().expect("cwd");
        let relative = pathdiff(&disk, &cwd);
        let failures = LogDirFailures::new(vec![relative.clone()]);
        let canonical = std::fs::canonicalize(&disk).expect("canonical");
        let file = canonical.join("orders-0/00000000000000000000.log");
        assert_eq!(failures.log_dir_of(&file), Some(&relative));
        assert_eq!(
            failures.log_dir_of(&relative.join("orders-0")),
            Some(&relative)
        );
        assert_eq!(failures.log_dir_of(Path::new("/elsewhere/x-0")), None);
    }

    /// `path` relative to `base` (both absolute), through `..` steps.
    fn pathdiff(path: &Path, base: &Path) -> PathBuf {
        let (path, base): (Vec<_>, Vec<_>) =
            (path.components().collect(), base.components().collect());
        let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
        let mut out = PathBuf::new();
        for _ in common..base.len() {
            out.push("..");
        }
        for part in &path[common..] {
            out.push(part);
        }
        out
    }
}
