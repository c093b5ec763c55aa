//! Deleting partition directories that were renamed aside (`<name>.<unique>-delete`), a
//! while after the rename, as Kafka does with `file.delete.delay.ms`.
//!
//! Renaming is the quick, atomic half of a deletion: the partition's name is free at once
//! and nothing can serve the old files. Removing the files (a big partition is many
//! unlinks) happens here later, on a blocking thread, so neither a DeleteTopics answer
//! nor the metadata follower waits for it. The delay leaves readers of the old files
//! time to finish and gives an operator a window to rescue a directory set aside by
//! mistake.
//!
//! Pending deletions live only in memory: a node that stops first leaves the renamed
//! directories on disk, and the next start finds them ([`DirDeleter::run`] looks once at
//! start-up) and deletes them after the broker's delay counted from then.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::poison::LockTolerant;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The queue of renamed directories and when each may go.
#[derive(Debug, Default)]
pub(crate) struct DirDeleter {
    pending: Mutex<BTreeMap<PathBuf, Instant>>,
    /// Rings when a deletion is queued, so the task re-plans its sleep.
    queued: Notify,
}

impl DirDeleter {
    /// Deletes `dir` (a directory already renamed aside) once `delay` has passed. A
    /// directory queued twice keeps its earlier time.
    pub(crate) fn schedule(&self, dir: PathBuf, delay: Duration) {
        let due = Instant::now() + delay;
        self.lock().entry(dir).or_insert(due);
        self.queued.notify_one();
    }

    /// The directories waiting.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> Vec<PathBuf> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Instant>> {
        self.pending.locked()
    }

    /// The directories due by `now`, taken off the queue, and when the next one is due.
    fn take_due(&self, now: Instant) -> (Vec<PathBuf>, Option<Instant>) {
        let mut pending = self.lock();
        let due: Vec<PathBuf> = pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(dir, _)| dir.clone())
            .collect();
        for dir in &due {
            pending.remove(dir);
        }
        (due, pending.values().min().copied())
    }

    /// The background task: queues the renamed directories found in the `log_dirs` at
    /// start-up (deleted after `startup_delay`), then deletes each queued directory when
    /// it is due, until `shutdown`. Directories still waiting then stay on disk for the
    /// next start.
    pub(crate) async fn run(
        &self,
        log_dirs: Vec<PathBuf>,
        startup_delay: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        for log_dir in log_dirs {
            let scan_dir = log_dir.clone();
            match tokio::task::spawn_blocking(move || leftover_delete_dirs(&scan_dir)).await {
                Ok(Ok(leftovers)) => {
                    for dir in leftovers {
                        tracing::info!(
                            dir = %dir.display(), delay_ms = startup_delay.as_millis() as u64,
                            "found a partition directory awaiting deletion; deleting it after the delay"
                        );
                        self.schedule(dir, startup_delay);
                    }
                }
                Ok(Err(e)) => tracing::warn!(
                    dir = %log_dir.display(), error = %e,
                    "cannot list the log directory for leftover -delete directories"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "listing leftover -delete directories panicked")
                }
            }
        }
        loop {
            let (due, next) = self.take_due(Instant::now());
            for dir in due {
                remove(dir).await;
            }
            if *shutdown.borrow() {
                return;
            }
            // Far enough to mean "nothing queued"; `queued` wakes the task before it.
            let wake_at = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                () = tokio::time::sleep_until(wake_at) => {}
                () = self.queued.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Removes one renamed directory on a blocking thread; a failure is logged (the
/// directory stays, and the next start tries again).
async fn remove(dir: PathBuf) {
    let target = dir.clone();
    match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&target)).await {
        Ok(Ok(())) => tracing::info!(dir = %dir.display(), "deleted partition directory"),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Ok(Err(e)) => {
            tracing::warn!(dir = %dir.display(), error = %e, "deleting partition directory failed");
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "deleting partition directory panicked");
        }
    }
}

/// The directories in `data_dir` named like a renamed partition awaiting deletion.
fn leftover_delete_dirs(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(data_dir)? {
        let entry = entry?;
        let is_delete_dir = entry
            .file_name()
            .to_str()
            .is_some_and(tidelog_storage::is_delete_dir_name);
        if is_delete_dir && entry.file_type()?.is_dir() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn renamed_directories_go_after_their_delay_and_leftovers_after_the_startup_delay() {
        let root = tempfile::tempdir().unwrap();
        let leftover = root
            .path()
            .join("old-0.0123456789abcdef0123456789abcdef-delete");
        std::fs::create_dir(&leftover).unwrap();
        std::fs::write(leftover.join("00000000000000000000.log"), b"x").unwrap();
        let kept = root.path().join("orders-0");
        std::fs::create_dir(&kept).unwrap();
        let renamed = root
            .path()
            .join("new-0.fedcba9876543210fedcba9876543210-delete");
        std::fs::create_dir(&renamed).unwrap();

        let deleter = std::sync::Arc::new(DirDeleter::default());
        let started = Instant::now();
        // Queued before the task starts (as apply_image does at start-up): the scan
        // finding it again keeps its own, shorter delay.
        deleter.schedule(renamed.clone(), Duration::from_millis(100));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn({
            let deleter = std::sync::Arc::clone(&deleter);
            let data_dir = root.path().to_path_buf();
            async move {
                deleter
                    .run(vec![data_dir], Duration::from_millis(1500), stopped)
                    .await
            }
        });
        wait_until(|| !renamed.exists()).await;
        assert!(leftover.exists(), "not before the start-up delay");
        wait_until(|| !leftover.exists()).await;
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert!(kept.exists(), "a partition directory is never touched");

        let last = root
            .path()
            .join("x-0.00000000000000000000000000000000-delete");
        std::fs::create_dir(&last).unwrap();
        deleter.schedule(last.clone(), Duration::from_secs(60));
        stop.send(true).unwrap();
        task.await.unwrap();
        assert!(last.exists(), "left for the next start after a shutdown");
        assert_eq!(deleter.pending(), vec![last]);
    }

    async fn wait_until(done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition not reached within 5 s");
    }
}
