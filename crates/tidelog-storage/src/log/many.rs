//! Durable steps over many logs at once, with one `syncfs` per step instead of an fsync
//! per file: closing every log of a broker, removing clean-shutdown markers before the
//! first writes after a clean start.
//!
//! Each step's files are written with the fsyncs deferred ([`fsync::defer`]), then the
//! filesystems holding them are synced, and only then does the next step, which relies
//! on the previous one being durable, begin. The order of what is durable is the one
//! [`Log::close`] keeps for a single log: data, indexes and producer snapshot first,
//! then the checkpoint files that point past them, then the clean-shutdown marker.

use super::{DurabilityHandle, Log};
use crate::error::StorageError;
use crate::{fsync, parallel};

/// See [`crate::close_logs`].
#[cfg(target_os = "linux")]
pub(crate) fn close_logs(logs: Vec<Log>, threads: usize) -> Vec<Result<(), StorageError>> {
    let mut results: Vec<Result<(), StorageError>> = Vec::with_capacity(logs.len());
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
    // Step 2, once step 1 is durable: the checkpoint files.
    let ok = step(&open, &mut results, DurabilityHandle::close_checkpoints);
    let mut open: Vec<(usize, Log)> = open
        .into_iter()
        .zip(ok)
        .filter_map(|(entry, ok)| ok.then_some(entry))
        .collect();
    // Step 3, once the checkpoints are durable: the markers; then they are made durable.
    let ok = step(&open, &mut results, DurabilityHandle::close_marker);
    open = open
        .into_iter()
        .zip(ok)
        .filter_map(|(entry, ok)| ok.then_some(entry))
        .collect();
    if let Err(e) = fsync::sync_filesystems(open.iter().map(|(_, log)| log.dir())) {
        for (i, _) in &open {
            if let Some(slot) = results.get_mut(*i) {
                *slot = Err(StorageError::copied_io(&e));
            }
        }
    }
    results
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
