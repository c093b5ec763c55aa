//! The seam between the controller and where its records go.

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::metadata_log::MetadataLog;
use crate::record::MetadataRecord;

/// An ordered, durable sequence of metadata records with offsets: the local
/// [`MetadataLog`] on a single node, a Raft-replicated log in a quorum. The controller
/// replays records into its image only after `append` returned them as durable.
pub trait MetadataStore {
    /// Appends `records` atomically (all or none); returns the offset of the last one.
    /// Must not return before the records survive a crash (or are committed).
    fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, ControllerError>;
    /// Offset the next appended record will get.
    fn next_offset(&self) -> u64;
    /// Records appended since the last snapshot covering the whole store.
    fn records_since_snapshot(&self) -> u64;
    /// Persists `image` so the records it covers may be discarded.
    fn snapshot(&mut self, image: &MetadataImage) -> Result<(), ControllerError>;
}

impl MetadataStore for MetadataLog {
    fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, ControllerError> {
        MetadataLog::append(self, records)
    }

    fn next_offset(&self) -> u64 {
        MetadataLog::next_offset(self)
    }

    fn records_since_snapshot(&self) -> u64 {
        MetadataLog::records_since_snapshot(self)
    }

    fn snapshot(&mut self, image: &MetadataImage) -> Result<(), ControllerError> {
        MetadataLog::snapshot(self, image)
    }
}

/// An in-memory store for tests and simulations: keeps every record, can be told to
/// fail appends.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// Every appended record with its offset, oldest first.
    pub records: Vec<(u64, MetadataRecord)>,
    /// While true, `append` fails with `ControllerError::Offline` and stores nothing.
    pub fail_appends: bool,
    /// The image passed to the last successful `snapshot`.
    pub last_snapshot: Option<MetadataImage>,
    next_offset: u64,
    since_snapshot: u64,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore::default()
    }
}

impl MetadataStore for MemoryStore {
    fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, ControllerError> {
        if self.fail_appends {
            return Err(ControllerError::Offline);
        }
        if records.is_empty() {
            return Err(ControllerError::EmptyBatch);
        }
        for record in records {
            self.records.push((self.next_offset, record.clone()));
            self.next_offset += 1;
        }
        self.since_snapshot += records.len() as u64;
        Ok(self.next_offset - 1)
    }

    fn next_offset(&self) -> u64 {
        self.next_offset
    }

    fn records_since_snapshot(&self) -> u64 {
        self.since_snapshot
    }

    fn snapshot(&mut self, image: &MetadataImage) -> Result<(), ControllerError> {
        if image.last_offset().is_some_and(|o| o >= self.next_offset) {
            return Err(ControllerError::SnapshotAhead {
                snapshot: image.last_offset(),
                last: self.next_offset.checked_sub(1),
            });
        }
        if image.last_offset().map(|o| o + 1) == Some(self.next_offset) {
            self.since_snapshot = 0;
        }
        self.last_snapshot = Some(image.clone());
        Ok(())
    }
}
