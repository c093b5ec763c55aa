//! The runtime's seam to a coordinator's partition: append a batch, watch the high
//! watermark and the leadership, read everything back for a load. [`PartitionLogs`]
//! serves it from the replica manager's partitions; tests use [`MemoryLog`].

use std::sync::Arc;

use bytes::Bytes;
use tidelog_records::{ControlMarker, LogRecord, LogRecords};
use tidelog_storage::{PendingSync, StorageError};
use tokio::sync::watch;

use super::CoordinatorError;
use crate::replica::{HwSnapshot, Partition, PartitionError, ReplicaManager};

/// Bytes read per step of a load.
const CHUNK_BYTES: usize = 1 << 20;

/// One thing read back from a coordinator's partition, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogEntry {
    Record {
        offset: i64,
        /// The producer of the transactional batch it came in.
        producer: Option<i64>,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    Marker {
        offset: i64,
        producer_id: i64,
        commit: bool,
    },
}

/// Where an append landed: its first offset and one past its last, and, when the
/// partition's `flush.messages` asks for it, the fsync to wait for (off the async
/// workers) before it counts as written.
pub(crate) struct Landed {
    pub(crate) base: i64,
    pub(crate) end: i64,
    pub(crate) sync: Option<PendingSync>,
}

/// A coordinator's partition, led by this node in one leader epoch.
pub(crate) trait CoordinatorLog: Send + Sync + 'static {
    /// The leader epoch this log was handed out for.
    fn epoch(&self) -> i32;

    /// Appends one batch (a control batch when `control`). Buffered, as a produce is.
    fn append(&self, batch: &mut [u8], control: bool) -> Result<Landed, CoordinatorError>;

    /// The high watermark and leadership, changing on every move.
    fn watch(&self) -> watch::Receiver<HwSnapshot>;

    /// Everything from the log start to the log end, once the high watermark has
    /// reached the log end (`Ok(None)` before: try again later). Blocking: reads files.
    fn read_committed(&self) -> Result<Option<(Vec<LogEntry>, i64)>, CoordinatorError>;

    /// Readies the log for the coordinator's writes, on the blocking thread of a load:
    /// whatever the first write would otherwise sync on the async runtime (the
    /// clean-shutdown marker of a log opened clean).
    fn prepare_writes(&self) {}
}

/// How the runtime finds the log of partition `index` of its topic, led here in
/// `epoch`; `None` when this node does not lead it in that epoch (yet).
pub(crate) trait LogSource: Send + Sync + 'static {
    fn log(&self, topic: &str, index: i32, epoch: i32) -> Option<Arc<dyn CoordinatorLog>>;
}

/// The partitions of the replica manager.
pub(crate) struct PartitionLogs(pub(crate) Arc<ReplicaManager>);

impl LogSource for PartitionLogs {
    fn log(&self, topic: &str, index: i32, epoch: i32) -> Option<Arc<dyn CoordinatorLog>> {
        let partition = self.0.get(topic, index)?;
        let state = *partition.hw_watch().borrow();
        (state.is_leader && state.leader_epoch == epoch)
            .then(|| Arc::new(PartitionLog { partition, epoch }) as Arc<dyn CoordinatorLog>)
    }
}

pub(super) struct PartitionLog {
    partition: Arc<Partition>,
    epoch: i32,
}

impl PartitionLog {
    #[cfg(test)]
    pub(super) fn new(partition: Arc<Partition>, epoch: i32) -> PartitionLog {
        PartitionLog { partition, epoch }
    }
}

fn storage_error(e: PartitionError) -> CoordinatorError {
    match e {
        PartitionError::Closed | PartitionError::NotLeader => CoordinatorError::NotCoordinator,
        PartitionError::Storage(StorageError::MessageTooLarge { .. }) => CoordinatorError::TooLarge,
        PartitionError::StaleMarker(stale) => CoordinatorError::StaleMarker(stale),
        other => CoordinatorError::NotAvailable(other.to_string()),
    }
}

impl CoordinatorLog for PartitionLog {
    fn epoch(&self) -> i32 {
        self.epoch
    }

    fn append(&self, batch: &mut [u8], control: bool) -> Result<Landed, CoordinatorError> {
        let now = crate::context::now_ms();
        let (appended, sync) = self
            .partition
            .append_for_coordinator(batch, now, control)
            .map_err(storage_error)?;
        if appended.leader_epoch != self.epoch {
            return Err(CoordinatorError::NotCoordinator);
        }
        Ok(Landed {
            base: appended.base_offset,
            end: appended.end_offset,
            sync,
        })
    }

    fn watch(&self) -> watch::Receiver<HwSnapshot> {
        self.partition.hw_watch()
    }

    fn prepare_writes(&self) {
        if let Err(e) = self.partition.remove_clean_shutdown_marker() {
            // The first append tries again and reports it.
            tracing::warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "removing the clean-shutdown marker failed");
        }
    }

    fn read_committed(&self) -> Result<Option<(Vec<LogEntry>, i64)>, CoordinatorError> {
        let p = &self.partition;
        let caught_up = |end: i64| -> Result<bool, CoordinatorError> {
            Ok(p.offsets().map_err(storage_error)?.high_watermark >= end)
        };
        let log_end = p
            .with_log(|log| Ok(log.log_end_offset()))
            .map_err(storage_error)?;
        if !caught_up(log_end)? {
            return Ok(None);
        }
        let (entries, end) = read_entries(p).map_err(storage_error)?;
        if !caught_up(end)? {
            return Ok(None);
        }
        Ok(Some((entries, end)))
    }
}

/// Every record and transaction marker of `p` from its log start to its log end, in
/// bounded chunks of whole batches (the one internal-topic reader,
/// `tidelog_records::LogRecords`). Each batch's header says where the next starts
/// (compaction may have removed a batch's last records). A batch that does not decode
/// is skipped with a warning: one bad batch must not keep a coordinator from loading.
pub(super) fn read_entries(p: &Partition) -> Result<(Vec<LogEntry>, i64), PartitionError> {
    let (log_start, log_end) =
        p.with_log(|log| Ok((log.log_start_offset(), log.log_end_offset())))?;
    let mut next = log_start;
    let mut out = Vec::new();
    while next < log_end {
        let read = p.read_for_follower(next, CHUNK_BYTES)?;
        let Some(slice) = read.slice else { break };
        let bytes = slice
            .read_to_vec()
            .map_err(|e| PartitionError::Storage(StorageError::Io(e)))?;
        let mut records = LogRecords::new(Bytes::from(bytes));
        for record in records.by_ref() {
            match record {
                Ok(record) if record.offset >= next && record.offset < log_end => {
                    out.extend(entry_of(record));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "skipping an undecodable batch");
                }
            }
        }
        match records.next_offset() {
            Some(after) if after > next => next = after,
            _ => {
                tracing::warn!(topic = %p.topic, partition = p.index, offset = next, "internal topic unreadable past this offset");
                break;
            }
        }
    }
    Ok((out, log_end))
}

/// What a coordinator replays of one record: a transaction marker, or a keyed record.
fn entry_of(record: LogRecord) -> Option<LogEntry> {
    if record.is_control {
        return record.marker.map(|marker| LogEntry::Marker {
            offset: record.offset,
            producer_id: record.producer_id,
            commit: marker == ControlMarker::Commit,
        });
    }
    Some(LogEntry::Record {
        offset: record.offset,
        producer: record.is_transactional.then_some(record.producer_id),
        key: record.key?.to_vec(),
        value: record.value.map(|v| v.to_vec()),
    })
}

/// An in-memory coordinator log for the runtime's tests: appends land at once, the
/// high watermark moves when the test says (or with every append when `auto_commit`).
#[cfg(test)]
pub(crate) struct MemoryLog {
    inner: std::sync::Mutex<MemoryInner>,
    state: watch::Sender<HwSnapshot>,
    epoch: i32,
}

#[cfg(test)]
struct MemoryInner {
    entries: Vec<LogEntry>,
    end: i64,
    auto_commit: bool,
    fail_appends: bool,
}

#[cfg(test)]
impl MemoryLog {
    pub(crate) fn new(epoch: i32, auto_commit: bool) -> Arc<MemoryLog> {
        Arc::new(MemoryLog {
            inner: std::sync::Mutex::new(MemoryInner {
                entries: Vec::new(),
                end: 0,
                auto_commit,
                fail_appends: false,
            }),
            state: watch::Sender::new(HwSnapshot {
                leader_epoch: epoch,
                is_leader: true,
                isr_len: 1,
                min_isr: 1,
                ..HwSnapshot::default()
            }),
            epoch,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        crate::poison::LockTolerant::locked(&self.inner)
    }

    /// Moves the high watermark to the log end.
    pub(crate) fn replicate(&self) {
        let end = self.lock().end;
        self.state.send_modify(|s| s.high_watermark = end);
    }

    pub(crate) fn high_watermark(&self) -> i64 {
        self.state.borrow().high_watermark
    }

    pub(crate) fn log_end(&self) -> i64 {
        self.lock().end
    }

    pub(crate) fn fail_appends(&self, fail: bool) {
        self.lock().fail_appends = fail;
    }

    /// Another node leads now.
    pub(crate) fn lose_leadership(&self) {
        self.state.send_modify(|s| s.is_leader = false);
    }
}

#[cfg(test)]
impl CoordinatorLog for MemoryLog {
    fn epoch(&self) -> i32 {
        self.epoch
    }

    fn append(&self, batch: &mut [u8], control: bool) -> Result<Landed, CoordinatorError> {
        let mut inner = self.lock();
        if inner.fail_appends {
            return Err(CoordinatorError::NotAvailable("disk failed".into()));
        }
        let base = inner.end;
        let _ = control;
        for (i, record) in LogRecords::new(Bytes::copy_from_slice(batch)).enumerate() {
            let record = record.map_err(|e| CoordinatorError::NotAvailable(e.to_string()))?;
            let offset = base + i as i64;
            inner
                .entries
                .extend(entry_of(LogRecord { offset, ..record }));
            inner.end = offset + 1;
        }
        let end = inner.end;
        let auto = inner.auto_commit;
        drop(inner);
        if auto {
            self.state.send_modify(|s| s.high_watermark = end);
        }
        Ok(Landed {
            base,
            end,
            sync: None,
        })
    }

    fn watch(&self) -> watch::Receiver<HwSnapshot> {
        self.state.subscribe()
    }

    fn read_committed(&self) -> Result<Option<(Vec<LogEntry>, i64)>, CoordinatorError> {
        let inner = self.lock();
        if self.state.borrow().high_watermark < inner.end {
            return Ok(None);
        }
        Ok(Some((inner.entries.clone(), inner.end)))
    }
}

#[cfg(test)]
impl LogSource for Arc<MemoryLog> {
    fn log(&self, _topic: &str, _index: i32, epoch: i32) -> Option<Arc<dyn CoordinatorLog>> {
        let state = *self.state.borrow();
        (state.is_leader && epoch == self.epoch)
            .then(|| Arc::clone(self) as Arc<dyn CoordinatorLog>)
    }
}
