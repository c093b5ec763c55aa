//! The Raft log and vote on local disk (openraft's `RaftLogStorage`).
//!
//! Files in the quorum directory:
//! - `raft.log`: [`file_frame`]s. An optional first frame of kind `PURGED` holds the
//!   JSON `LogId` of the last entry removed by log compaction; every other frame is of
//!   kind `ENTRY` and holds one JSON openraft entry, indexes contiguous. Appends are
//!   fsynced before openraft is told they are durable. At open, a torn or
//!   checksum-failing frame and everything after it is cut (a crash during an append
//!   that was never acknowledged). Purging rewrites the file (temp file, fsync, rename,
//!   fsync dir) with the `PURGED` frame and the entries kept.
//! - `raft.state`: one frame of kind `STATE` with the JSON vote and committed log id,
//!   replaced atomically on every change. A vote must never be forgotten (that could
//!   let a node vote twice in a term), so an unreadable state file stops the node.
//!
//! All entries are also kept in memory: the metadata log is small and compacted by
//! snapshots. openraft's storage calls change the in-memory log and queue the file
//! write on the log's writer thread ([`writer`]); an append returns at once and reports
//! durability through openraft's `LogFlushed` callback after its fdatasync, the other
//! calls await their write. No async worker waits on the disk, and every write lands
//! in the order openraft made the calls.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, OpenOptions};
use std::io::BufReader;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogId, RaftLogReader};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::file_frame::{self, FileFrame};
use super::types::{io_write_error, Entry, LogId, StorageError, TypeConfig, Vote};
use crate::durable::read_bounded;
use crate::error::ControllerError;

mod writer;

pub(crate) use writer::WriterThread;
use writer::{Done, Job, Op, Writer};

const LOG_FILE: &str = "raft.log";
const STATE_FILE: &str = "raft.state";
const KIND_ENTRY: u8 = 1;
const KIND_PURGED: u8 = 2;
const KIND_STATE: u8 = 3;
/// One entry holds one request's records; the metadata log's own frame limit applies.
pub(crate) const MAX_ENTRY_BYTES: usize = 80 * 1024 * 1024;
const MAX_STATE_BYTES: usize = 64 * 1024;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct HardState {
    vote: Option<Vote>,
    committed: Option<LogId>,
}

#[derive(Debug)]
struct LogInner {
    /// The length `raft.log` has once every queued write is done.
    file_len: u64,
    /// index -> (position of its frame in `raft.log`, entry)
    entries: BTreeMap<u64, (u64, Entry)>,
    purged: Option<LogId>,
    state: HardState,
}

/// The log store handed to openraft: the in-memory log and its writer thread.
#[derive(Debug)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<LogInner>>,
    writer: Writer,
}

/// What openraft's replication tasks read entries through (no writes).
#[derive(Debug, Clone)]
pub(crate) struct LogReader {
    inner: Arc<Mutex<LogInner>>,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir`, cutting a torn tail.
    pub(crate) fn open(dir: &Path) -> Result<LogStore, ControllerError> {
        let state = load_state(dir)?;
        let path = dir.join(LOG_FILE);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| ControllerError::io(&path, e))?;
        let mut reader = BufReader::new(&file);
        let mut entries = BTreeMap::new();
        let mut purged = None;
        let mut pos = 0u64;
        loop {
            let frame = file_frame::read(&mut reader, MAX_ENTRY_BYTES)
                .map_err(|e| ControllerError::io(&path, e))?;
            let (kind, payload, size) = match frame {
                FileFrame::Frame {
                    kind,
                    payload,
                    size,
                } => (kind, payload, size),
                FileFrame::End => break,
                FileFrame::Torn(reason) => {
                    tracing::warn!(path = %path.display(), pos, %reason, "cutting the torn tail of the raft log");
                    file.set_len(pos)
                        .and_then(|()| file.sync_all())
                        .map_err(|e| ControllerError::io(&path, e))?;
                    break;
                }
            };
            match kind {
                KIND_PURGED if pos == 0 => {
                    let id: LogId = serde_json::from_slice(&payload)
                        .map_err(|e| ControllerError::corrupt(&path, e.to_string()))?;
                    purged = Some(id);
                }
                KIND_ENTRY => {
                    let entry: Entry = serde_json::from_slice(&payload)
                        .map_err(|e| ControllerError::corrupt(&path, e.to_string()))?;
                    let index = entry.get_log_id().index;
                    let expected = entries
                        .keys()
                        .next_back()
                        .map(|last| last + 1)
                        .or(purged.map(|p: LogId| p.index + 1));
                    if expected.is_some_and(|want| want != index) {
                        return Err(ControllerError::corrupt(
                            &path,
                            format!("entry {index} where {expected:?} was expected"),
                        ));
                    }
                    entries.insert(index, (pos, entry));
                }
                other => {
                    return Err(ControllerError::corrupt(
                        &path,
                        format!("unexpected frame kind {other} at byte {pos}"),
                    ))
                }
            }
            pos += size;
        }
        drop(reader);
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogInner {
                file_len: pos,
                entries,
                purged,
                state,
            })),
            writer: Writer::start(dir, file, pos)?,
        })
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        lock(&self.inner)
    }

    /// The writer thread, to wait for its last writes once openraft has stopped.
    pub(crate) fn writer_thread(&self) -> WriterThread {
        self.writer.thread()
    }
}

fn lock(inner: &Mutex<LogInner>) -> MutexGuard<'_, LogInner> {
    // Every change of the in-memory log is made whole before the lock is released
    // (encoding, the only fallible part, happens first); continue with what is there.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

fn last_log_id(inner: &LogInner) -> Option<LogId> {
    inner
        .entries
        .values()
        .next_back()
        .map(|(_, e)| *e.get_log_id())
        .or(inner.purged)
}

fn load_state(dir: &Path) -> Result<HardState, ControllerError> {
    let path = dir.join(STATE_FILE);
    let Some(bytes) = read_bounded(&path, MAX_STATE_BYTES as u64)? else {
        return Ok(HardState::default());
    };
    let corrupt = |reason: String| ControllerError::corrupt(&path, reason);
    match file_frame::decode_single(&bytes, MAX_STATE_BYTES).map_err(corrupt)? {
        (KIND_STATE, payload) => {
            serde_json::from_slice(&payload).map_err(|e| corrupt(e.to_string()))
        }
        (kind, _) => Err(corrupt(format!("unexpected frame kind {kind}"))),
    }
}

/// The `raft.state` file's bytes for `state`.
fn encode_state(state: &HardState) -> Result<Vec<u8>, ControllerError> {
    let json = serde_json::to_vec(state).map_err(|e| ControllerError::Encode(e.to_string()))?;
    Ok(file_frame::encode(KIND_STATE, &json))
}

fn read_range<RB: RangeBounds<u64>>(inner: &LogInner, range: RB) -> Vec<Entry> {
    let start = match range.start_bound() {
        Bound::Included(i) => Bound::Included(*i),
        Bound::Excluded(i) => Bound::Excluded(*i),
        Bound::Unbounded => Bound::Unbounded,
    };
    let end = match range.end_bound() {
        Bound::Included(i) => Bound::Included(*i),
        Bound::Excluded(i) => Bound::Excluded(*i),
        Bound::Unbounded => Bound::Unbounded,
    };
    inner
        .entries
        .range((start, end))
        .map(|(_, (_, e))| e.clone())
        .collect()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_range(&self.lock(), range))
    }
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_range(&lock(&self.inner), range))
    }
}

/// A write error as openraft's storage error.
fn write_failed(message: String) -> StorageError {
    io_write_error(std::io::Error::other(message))
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        Ok(LogState {
            last_purged_log_id: inner.purged,
            last_log_id: last_log_id(&inner),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogReader {
            inner: Arc::clone(&self.inner),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        self.write_state(move |state| {
            state.vote = Some(vote);
            true
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.write_state(move |state| {
            let changed = state.committed != committed;
            state.committed = committed;
            changed
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.lock().state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let permit = self.writer.reserve().await.map_err(write_failed)?;
        match self.stage_append(entries) {
            Ok(frames) => {
                // Readable from now on; durable when the callback says so.
                permit.send(Job {
                    op: Op::Append(frames),
                    done: Done::Flushed(callback),
                });
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(io_write_error(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let permit = self.writer.reserve().await.map_err(write_failed)?;
        let Some(len) = self.stage_truncate(log_id.index) else {
            return Ok(());
        };
        await_job(permit, Op::Truncate(len)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let permit = self.writer.reserve().await.map_err(write_failed)?;
        match self.stage_purge(log_id).map_err(io_write_error)? {
            Some(bytes) => await_job(permit, Op::Rewrite(bytes)).await,
            None => Ok(()),
        }
    }
}

/// Queues `op` in the reserved slot and waits (asynchronously) until it is on disk.
async fn await_job(permit: tokio::sync::mpsc::Permit<'_, Job>, op: Op) -> Result<(), StorageError> {
    let (reply, answer) = oneshot::channel();
    permit.send(Job {
        op,
        done: Done::Reply(reply),
    });
    match answer.await {
        Ok(result) => result.map_err(write_failed),
        Err(_) => Err(write_failed("the raft log writer dropped a write".into())),
    }
}

impl LogStore {
    /// Changes the hard state with `change` and, if it says something changed, writes
    /// it; the vote must be on disk before openraft acts on it, so this waits.
    async fn write_state(
        &mut self,
        change: impl FnOnce(&mut HardState) -> bool,
    ) -> Result<(), StorageError> {
        let permit = self.writer.reserve().await.map_err(write_failed)?;
        let bytes = {
            let mut inner = self.lock();
            if !change(&mut inner.state) {
                return Ok(());
            }
            encode_state(&inner.state).map_err(io_write_error)?
        };
        await_job(permit, Op::SaveState(bytes)).await
    }

    /// Adds `entries` to the in-memory log and returns their frames for the file;
    /// nothing changes if one of them cannot be encoded.
    fn stage_append(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<u8>, ControllerError> {
        let mut inner = self.lock();
        let mut bytes = Vec::new();
        let mut placed = Vec::new();
        for entry in entries {
            let json =
                serde_json::to_vec(&entry).map_err(|e| ControllerError::Encode(e.to_string()))?;
            if json.len() >= MAX_ENTRY_BYTES {
                return Err(ControllerError::BatchTooLarge {
                    size: json.len(),
                    limit: MAX_ENTRY_BYTES,
                });
            }
            placed.push((inner.file_len + bytes.len() as u64, entry));
            bytes.extend_from_slice(&file_frame::encode(KIND_ENTRY, &json));
        }
        inner.file_len += bytes.len() as u64;
        for (pos, entry) in placed {
            inner.entries.insert(entry.get_log_id().index, (pos, entry));
        }
        Ok(bytes)
    }

    /// Removes the entry at `index` and every later one (a new leader overruled them)
    /// from memory; the length to cut the file to, if there was anything to remove.
    fn stage_truncate(&self, index: u64) -> Option<u64> {
        let mut inner = self.lock();
        let pos = inner.entries.get(&index).map(|(pos, _)| *pos)?;
        inner.file_len = pos;
        inner.entries.split_off(&index);
        Some(pos)
    }

    /// Drops every entry up to `log_id` (covered by a snapshot) from memory; the new
    /// content of the file, if anything changed.
    fn stage_purge(&self, log_id: LogId) -> Result<Option<Vec<u8>>, ControllerError> {
        let mut inner = self.lock();
        if inner.purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(None);
        }
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        inner.purged = Some(log_id);
        rewrite(&mut inner).map(Some)
    }
}

/// The new content of `raft.log` after a purge (the purge marker and the entries still
/// held), with the entries' positions in it updated.
fn rewrite(inner: &mut LogInner) -> Result<Vec<u8>, ControllerError> {
    let mut bytes = Vec::new();
    if let Some(purged) = inner.purged {
        let json =
            serde_json::to_vec(&purged).map_err(|e| ControllerError::Encode(e.to_string()))?;
        bytes.extend_from_slice(&file_frame::encode(KIND_PURGED, &json));
    }
    let mut positions = Vec::with_capacity(inner.entries.len());
    for (index, (_, entry)) in &inner.entries {
        let json = serde_json::to_vec(entry).map_err(|e| ControllerError::Encode(e.to_string()))?;
        positions.push((*index, bytes.len() as u64));
        bytes.extend_from_slice(&file_frame::encode(KIND_ENTRY, &json));
    }
    inner.file_len = bytes.len() as u64;
    for (index, pos) in positions {
        if let Some(slot) = inner.entries.get_mut(&index) {
            slot.0 = pos;
        }
    }
    Ok(bytes)
}

/// Removes temp files a crash may have left beside the quorum's files.
pub(crate) fn remove_temp_files(dir: &Path) -> Result<(), ControllerError> {
    let listing = fs::read_dir(dir).map_err(|e| ControllerError::io(dir, e))?;
    for entry in listing {
        let entry = entry.map_err(|e| ControllerError::io(dir, e))?;
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(crate::durable::TMP_SUFFIX) {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| ControllerError::io(&path, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
