//! The Raft state machine: the [`MetadataImage`], fed by the same
//! [`MetadataImage::replay`] as the single-node log, with snapshots of the image.
//!
//! Record offsets: the records of each applied entry get the next offsets after the
//! image's last one, so every voter numbers records alike (Raft's own blank and
//! membership entries carry no records and take no offsets).
//!
//! File `raft.snapshot`: one [`file_frame`] of kind `SNAPSHOT` whose payload is
//! ```text
//! 0  u32  meta_len   length of the JSON openraft SnapshotMeta (last log id, membership)
//! 4  ..   meta JSON
//! .. ..   the image in the metadata snapshot format (see `crate::snapshot`), which is
//!         also exactly what is shipped to a voter installing the snapshot
//! ```
//! Replaced atomically; unreadable means the node refuses to start (the log prefix it
//! covers may be gone). The image itself is not persisted otherwise: at start openraft
//! replays the log from the snapshot up to the persisted commit point.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftLogId, RaftSnapshotBuilder, Snapshot};
use tokio::sync::{broadcast, watch};

use super::file_frame;
use super::types::{
    io_read_error, io_write_error, Applied, Entry, LogId, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig,
};
use super::CommittedEvent;
use crate::durable::{read_bounded, write_atomically};
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::snapshot;

const SNAPSHOT_FILE: &str = "raft.snapshot";
const KIND_SNAPSHOT: u8 = 4;
/// Largest snapshot accepted from disk or from a leader.
pub(crate) const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024 * 1024;

#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: Arc<Vec<u8>>,
}

/// The latest snapshot, shared by the state machine and its snapshot builders (which
/// openraft runs on tasks of their own). Once `closed` (the voter shut down), nothing
/// is written any more: a builder still running must not write into a directory that
/// a restarted voter now owns.
#[derive(Debug, Default)]
pub(crate) struct SnapshotSlot {
    stored: Option<StoredSnapshot>,
    closed: bool,
}

/// Closes `slot` once any write in progress is done (see [`SnapshotSlot`]).
pub(crate) fn close_snapshots(slot: &Mutex<SnapshotSlot>) {
    slot.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
}

/// What the state machine shares with the quorum handle.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) image: watch::Sender<Arc<MetadataImage>>,
    pub(crate) events: broadcast::Sender<CommittedEvent>,
    pub(crate) snapshots_installed: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct StateMachine {
    dir: PathBuf,
    cluster_id: String,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    snapshot: Arc<Mutex<SnapshotSlot>>,
    published: Arc<Published>,
    snapshot_counter: u64,
}

impl StateMachine {
    /// Loads the snapshot in `dir` (if any) as the starting image.
    pub(crate) fn open(
        dir: &Path,
        cluster_id: &str,
        published: Arc<Published>,
    ) -> Result<StateMachine, ControllerError> {
        let path = dir.join(SNAPSHOT_FILE);
        let mut machine = StateMachine {
            dir: dir.to_path_buf(),
            cluster_id: cluster_id.to_owned(),
            image: Arc::new(MetadataImage::new(cluster_id)),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: Arc::new(Mutex::new(SnapshotSlot::default())),
            published,
            snapshot_counter: 0,
        };
        if let Some(bytes) = read_bounded(&path, MAX_SNAPSHOT_BYTES)? {
            let (meta, data) = decode_snapshot_file(&path, &bytes)?;
            let image = snapshot::decode(&path, &data, cluster_id)?;
            machine.image = Arc::new(image);
            machine.last_applied = meta.last_log_id;
            machine.membership = meta.last_membership.clone();
            machine.lock_snapshot().stored = Some(StoredSnapshot {
                meta,
                data: Arc::new(data),
            });
        }
        machine
            .published
            .image
            .send_replace(Arc::clone(&machine.image));
        Ok(machine)
    }

    fn lock_snapshot(&self) -> std::sync::MutexGuard<'_, SnapshotSlot> {
        self.snapshot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The slot the voter closes at shutdown.
    pub(crate) fn snapshot_slot(&self) -> Arc<Mutex<SnapshotSlot>> {
        Arc::clone(&self.snapshot)
    }
}

fn decode_snapshot_file(
    path: &Path,
    bytes: &[u8],
) -> Result<(SnapshotMeta, Vec<u8>), ControllerError> {
    let corrupt = |reason: String| ControllerError::corrupt(path, reason);
    let (kind, payload) =
        file_frame::decode_single(bytes, MAX_SNAPSHOT_BYTES as usize).map_err(corrupt)?;
    if kind != KIND_SNAPSHOT || payload.len() < 4 {
        return Err(corrupt(format!("unexpected frame kind {kind}")));
    }
    let meta_len = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) as usize;
    let rest = &payload[4..];
    if meta_len > rest.len() {
        return Err(corrupt(format!("meta length {meta_len} beyond the file")));
    }
    let meta: SnapshotMeta =
        serde_json::from_slice(&rest[..meta_len]).map_err(|e| corrupt(e.to_string()))?;
    Ok((meta, rest[meta_len..].to_vec()))
}

/// Writes `snap` as `raft.snapshot` unless the one on disk is at least as new, on a
/// blocking thread (it fsyncs). Writes nothing once the slot is closed.
#[allow(clippy::result_large_err)] // openraft's error type, fixed by its traits
async fn store_snapshot(
    dir: &Path,
    slot: &Arc<Mutex<SnapshotSlot>>,
    snap: StoredSnapshot,
) -> Result<(), StorageError> {
    let (dir, slot) = (dir.to_path_buf(), Arc::clone(slot));
    tokio::task::spawn_blocking(move || store_snapshot_now(&dir, &slot, snap))
        .await
        .map_err(io_write_error)?
}

#[allow(clippy::result_large_err)] // openraft's error type, fixed by its traits
fn store_snapshot_now(
    dir: &Path,
    slot: &Mutex<SnapshotSlot>,
    snap: StoredSnapshot,
) -> Result<(), StorageError> {
    let mut current = slot.lock().unwrap_or_else(|p| p.into_inner());
    if current.closed {
        return Err(io_write_error(std::io::Error::other(
            "the controller voter is shut down",
        )));
    }
    if current
        .stored
        .as_ref()
        .is_some_and(|c| c.meta.last_log_id >= snap.meta.last_log_id)
    {
        return Ok(());
    }
    let meta = serde_json::to_vec(&snap.meta).map_err(io_write_error)?;
    let mut payload = Vec::with_capacity(4 + meta.len() + snap.data.len());
    payload.extend_from_slice(&u32::try_from(meta.len()).unwrap_or(u32::MAX).to_be_bytes());
    payload.extend_from_slice(&meta);
    payload.extend_from_slice(&snap.data);
    write_atomically(
        dir,
        SNAPSHOT_FILE,
        &file_frame::encode(KIND_SNAPSHOT, &payload),
    )
    .map_err(io_write_error)?;
    current.stored = Some(snap);
    Ok(())
}

/// Builds a snapshot of the image as it was when openraft asked for the builder.
#[derive(Debug)]
pub(crate) struct SnapshotBuilder {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    slot: Arc<Mutex<SnapshotSlot>>,
    snapshot_id: String,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let data = snapshot::encode(&self.image).map_err(io_write_error)?;
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: self.snapshot_id.clone(),
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: Arc::new(data.clone()),
        };
        store_snapshot(&self.dir, &self.slot, stored).await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut responses = Vec::new();
        let mut batches = Vec::new();
        for entry in entries {
            let log_id = *entry.get_log_id();
            self.last_applied = Some(log_id);
            match entry.payload {
                EntryPayload::Blank => responses.push(Applied {
                    first_offset: None,
                    last_offset: None,
                }),
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(log_id), membership);
                    responses.push(Applied {
                        first_offset: None,
                        last_offset: None,
                    });
                }
                EntryPayload::Normal(batch) => {
                    // Copies the image only if a reader still holds the published one,
                    // and then only once per call: Raft's own entries copy nothing.
                    let image = Arc::make_mut(&mut self.image);
                    let first = image.last_offset().map_or(0, |o| o + 1);
                    for (offset, record) in (first..).zip(&batch.records) {
                        image.replay(offset, record);
                    }
                    let last = (first + batch.records.len() as u64).checked_sub(1);
                    responses.push(Applied {
                        first_offset: last.map(|_| first),
                        last_offset: last,
                    });
                    if !batch.records.is_empty() {
                        batches.push(CommittedEvent::Records {
                            first_offset: first,
                            records: Arc::from(batch.records),
                        });
                    }
                }
            }
        }
        if !batches.is_empty() {
            self.published.image.send_replace(Arc::clone(&self.image));
            for event in batches {
                // No receiver is fine: subscribers come and go.
                let _ = self.published.events.send(event);
            }
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_counter += 1;
        let (term, index) = self
            .last_applied
            .map_or((0, 0), |id| (id.leader_id.term, id.index));
        SnapshotBuilder {
            dir: self.dir.clone(),
            image: Arc::clone(&self.image),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            slot: Arc::clone(&self.snapshot),
            snapshot_id: format!("{term}-{index}-{}", self.snapshot_counter),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let path = self.dir.join(SNAPSHOT_FILE);
        let image = snapshot::decode(&path, &data, &self.cluster_id).map_err(io_read_error)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: Arc::new(data),
        };
        store_snapshot(&self.dir, &self.snapshot, stored).await?;
        self.image = Arc::new(image);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.published
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        self.published.image.send_replace(Arc::clone(&self.image));
        let _ = self
            .published
            .events
            .send(CommittedEvent::Snapshot(Arc::clone(&self.image)));
        tracing::info!(snapshot = %meta, "installed a metadata snapshot from the leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.lock_snapshot().stored.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.as_ref().clone())),
        }))
    }
}
