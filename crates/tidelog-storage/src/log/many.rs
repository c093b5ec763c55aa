//! Durable steps over many logs at once, with one `syncfs` per step instead of an fsync
//! per file: closing every log of a broker, removing clean-shutdown markers before the
//! first writes after a clean start.
//!
//! Each step's files are written with the fsyncs deferred ([`fsync::defer`]), then the
//! filesystems holding them are synced, and only then does the next step, which relies
//! on the previous one being durable, begin. The order of what is durable is the one
//! [`Log::close`] keeps for a single log: data, indexes and producer snapshot first,
//! then the checkpoint files that point past them, then the clean-shutdown marker (here
//! one list per log directory naming the logs closed, see `clean_list`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::clean_list::{self, ClosedCleanly};
use super::{DurabilityHandle, Log};
use crate::error::StorageError;
use crate::{fsync, parallel};

/// See [`crate::close_logs`].
#[cfg(target_os = "linux")]
pub(crate) fn close_logs(logs: Vec<Log>, threads: usize) -> Vec<Result<(), StorageError>> {
    let mut results: Vec<Result<(), StorageError>> = Vec::with_capacity(logs.len());
    let started = Instant::now();
    // Step 1: data, indexes, producer snapshots; checkpoint values staged.
    let prepared = parallel::map_bounded(logs, threads, |mut log| {
        let _deferred = fsync::defer();
        log.close_data().map(|()| log)
    });
    let mut open: Vec<(usize, Log)> = Vec::with_capacity(prepared.len());
    for (i, outcome) in prepared.into_iter().enumerate() {
        match outcome {
            Ok(log) => {
                open.push((i, log));
                results.push(Ok(()));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    // A failed step leaves the logs that reached it without a marker (dropped: a crash
    // as far as their files go, so the next open recovers them).
    let step = |open: &[(usize, Log)],
                results: &mut Vec<Result<(), StorageError>>,
                work: fn(&DurabilityHandle) -> Result<(), StorageError>|
     -> Vec<bool> {
        if let Err(e) = fsync::sync_filesystems(open.iter().map(|(_, log)| log.dir())) {
            for (i, _) in open {
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Err(StorageError::copied_io(&e));
                }
            }
            return vec![false; open.len()];
        }
        let handles: Vec<DurabilityHandle> =
            open.iter().map(|(_, log)| log.durability.clone()).collect();
        let done = parallel::map_bounded(handles, threads, |handle| {
            let _deferred = fsync::defer();
            work(&handle)
        });
        open.iter()
            .zip(done)
            .map(|((i, _), outcome)| match outcome {
                Ok(()) => true,
                Err(e) => {
                    if let Some(slot) = results.get_mut(*i) {
                        *slot = Err(e);
                    }
                    false
                }
            })
            .collect()
    };
    let data_done = started.elapsed();
    // Step 2, once step 1 is durable: the checkpoint files (of a log to be listed, only
    // the log start: its list entry stands for its recovery point and epochs).
    let ok = step(&open, &mut results, close_checkpoints_before_listing);
    let checkpoints_done = started.elapsed();
    let open: Vec<(usize, Log)> = open
        .into_iter()
        .zip(ok)
        .filter_map(|(entry, ok)| ok.then_some(entry))
        .collect();
    // Step 3, once the checkpoints are durable: each log directory's list of the logs
    // closed cleanly (one file instead of a marker per log); then it is made durable.
    match fsync::sync_filesystems(open.iter().map(|(_, log)| log.dir())) {
        Ok(()) => write_lists(&open, &mut results),
        Err(e) => {
            for (i, _) in &open {
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Err(StorageError::copied_io(&e));
                }
            }
        }
    }
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        logs = results.len(),
        failed = results.iter().filter(|r| r.is_err()).count(),
        data_ms = ms(data_done),
        checkpoints_ms = ms(checkpoints_done.saturating_sub(data_done)),
        lists_ms = ms(started.elapsed().saturating_sub(checkpoints_done)),
        "logs closed"
    );
    results
}

/// Step 2 of `close_logs` for one log.
fn close_checkpoints_before_listing(handle: &DurabilityHandle) -> Result<(), StorageError> {
    if list_name(handle.dir()).is_some() {
        handle.close_checkpoints_for_list()
    } else {
        handle.close_checkpoints()
    }
}

/// The log directory holding the partition directory `dir` and the name it is listed
/// under there, if it can be listed.
fn list_name(dir: &Path) -> Option<(&Path, &str)> {
    let log_dir = dir.parent().filter(|p| !p.as_os_str().is_empty())?;
    Some((log_dir, dir.file_name()?.to_str()?))
}

/// Step 3 of `close_logs`: the lists, written and made durable; a log without a log
/// directory above it gets its own marker, as `close` writes it.
#[cfg(target_os = "linux")]
fn write_lists(open: &[(usize, Log)], results: &mut [Result<(), StorageError>]) {
    let mut fail = |i: usize, e: StorageError| {
        if let Some(slot) = results.get_mut(i) {
            *slot = Err(e);
        }
    };
    let mut lists: BTreeMap<PathBuf, Vec<(usize, String, ClosedCleanly)>> = BTreeMap::new();
    for (i, log) in open {
        let entry = listed_as(log);
        if !log.durability.close_into_list() {
            continue;
        }
        match entry {
            Some((log_dir, name, closed)) => {
                lists.entry(log_dir).or_default().push((*i, name, closed));
            }
            // Its checkpoints were all written (step 2): its own marker, as `close`.
            None if list_name(log.dir()).is_none() => {
                if let Err(e) = log.durability.write_marker_file() {
                    fail(*i, e);
                }
            }
            // Not expected (a log always has an active segment); with its recovery point
            // and epochs left to a list it is not in, it is recovered at the next open.
            None => {}
        }
    }
    let mut written = Vec::with_capacity(lists.len());
    for (log_dir, entries) in lists {
        let _deferred = fsync::defer();
        let named: Vec<(String, ClosedCleanly)> = entries
            .iter()
            .map(|(_, name, closed)| (name.clone(), closed.clone()))
            .collect();
        match clean_list::write(&log_dir, &named) {
            Ok(()) => written.push((log_dir, entries)),
            Err(e) => {
                for (i, _, _) in &entries {
                    fail(*i, StorageError::copied_io(&e));
                }
            }
        }
    }
    if let Err(e) = fsync::sync_filesystems(written.iter().map(|(dir, _)| dir.as_path())) {
        for (i, _, _) in written.iter().flat_map(|(_, entries)| entries) {
            fail(*i, StorageError::copied_io(&e));
        }
    }
}

/// Where `log` is listed when closed cleanly: its log directory, its partition
/// directory's name, and where it ends with its epochs.
fn listed_as(log: &Log) -> Option<(PathBuf, String, ClosedCleanly)> {
    let (log_dir, name) = list_name(log.dir())?;
    let active = log.active().ok()?;
    let closed = ClosedCleanly {
        active_base: active.base_offset(),
        active_bytes: active.size(),
        epochs: log.epochs.pairs(),
    };
    Some((log_dir.to_path_buf(), name.to_owned(), closed))
}

/// See [`crate::close_logs`].
#[cfg(not(target_os = "linux"))]
pub(crate) fn close_logs(logs: Vec<Log>, threads: usize) -> Vec<Result<(), StorageError>> {
    parallel::map_bounded(logs, threads, Log::close)
}

/// See [`crate::remove_clean_shutdown_markers`].
#[cfg(target_os = "linux")]
pub(crate) fn remove_clean_shutdown_markers(
    handles: &[DurabilityHandle],
) -> Vec<Result<(), StorageError>> {
    let unlinked: Vec<Result<bool, StorageError>> = handles
        .iter()
        .map(DurabilityHandle::unlink_marker)
        .collect();
    let dirs = handles
        .iter()
        .zip(&unlinked)
        .filter(|(_, u)| matches!(u, Ok(true)))
        .map(|(h, _)| h.dir());
    let synced = fsync::sync_filesystems(dirs);
    handles
        .iter()
        .zip(unlinked)
        .map(|(handle, unlinked)| match (unlinked, &synced) {
            (Ok(true), Ok(())) => {
                handle.marker_removed();
                Ok(())
            }
            (Ok(true), Err(e)) => Err(StorageError::copied_io(e)),
            (Ok(false), _) => Ok(()),
            (Err(e), _) => Err(e),
        })
        .collect()
}

/// See [`crate::remove_clean_shutdown_markers`].
#[cfg(not(target_os = "linux"))]
pub(crate) fn remove_clean_shutdown_markers(
    handles: &[DurabilityHandle],
) -> Vec<Result<(), StorageError>> {
    handles
        .iter()
        .map(DurabilityHandle::remove_clean_shutdown_marker)
        .collect()
}
