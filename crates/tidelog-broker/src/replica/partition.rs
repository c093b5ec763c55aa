//! One partition hosted by this node: its log, leader epoch, and the long-poll fetches
//! parked on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tidelog_storage::{
    AbortedTxn, AppendOptions, AppendOrigin, DurabilityHandle, FileSlice, Log, LogConfig,
    PendingSync, StorageError,
};

use super::dir_failure::LogDirFailures;
use super::idempotence::{self, CheckError, SequenceCheck, SequenceError};
use super::replication::HwSnapshot;
use super::state::ReplicaState;
use crate::poison::LockTolerant;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

/// What a read saw, with the offsets a fetch response reports beside the records.
pub(crate) struct PartitionRead {
    pub(crate) slice: Option<FileSlice>,
    pub(crate) high_watermark: i64,
    pub(crate) last_stable_offset: i64,
    pub(crate) log_start_offset: i64,
    /// For read_committed: the aborted transactions overlapping the read range, so the
    /// client can drop their records (empty otherwise).
    pub(crate) aborted: Vec<AbortedTxn>,
}

/// The offsets of a partition at one instant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offsets {
    pub(crate) log_start: i64,
    pub(crate) high_watermark: i64,
    pub(crate) last_stable: i64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum PartitionError {
    #[error("partition is no longer hosted here")]
    Closed,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error("this node is not the partition's leader")]
    NotLeader,
    /// The producer's transaction ended (a marker landed) between its verification and
    /// this append: the batch would open a transaction nobody decides.
    #[error("the producer's transaction ended while its batch was being verified")]
    VerificationLost,
    /// A transaction marker older than what the log already holds for its producer.
    #[error(transparent)]
    StaleMarker(#[from] StaleMarker),
}

/// Why a transaction marker is refused (Kafka's checks on an end-transaction marker): a
/// zombie coordinator, or a marker for a producer epoch that has since been bumped,
/// must not close a later transaction of the same producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StaleMarker {
    #[error("marker for producer {producer_id} has epoch {got}, older than the log's {current}")]
    ProducerEpoch {
        producer_id: i64,
        got: i16,
        current: i16,
    },
    #[error("marker for producer {producer_id} comes from coordinator epoch {got}, older than the log's {current}")]
    CoordinatorEpoch {
        producer_id: i64,
        got: i32,
        current: i32,
    },
}

impl StaleMarker {
    /// Checks a control batch a coordinator asks this leader to append, whose header
    /// is `header`.
    fn check(
        log: &Log,
        batch: &[u8],
        header: &tidelog_storage::BatchHeader<'_>,
    ) -> Result<(), StaleMarker> {
        let producer_id = header.producer_id();
        let Some(entry) = log.producer_state().get(producer_id) else {
            return Ok(());
        };
        if header.producer_epoch() < entry.epoch {
            return Err(StaleMarker::ProducerEpoch {
                producer_id,
                got: header.producer_epoch(),
                current: entry.epoch,
            });
        }
        let coordinator_epoch = tidelog_records::batch_transaction_marker(batch)
            .and_then(|(_, epoch)| epoch)
            .unwrap_or(-1);
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(StaleMarker::CoordinatorEpoch {
                producer_id,
                got: coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    pub(crate) fn code(&self) -> i16 {
        use kafka_protocol::error::ResponseError as E;
        match self {
            StaleMarker::ProducerEpoch { .. } => E::InvalidProducerEpoch.code(),
            StaleMarker::CoordinatorEpoch { .. } => E::TransactionCoordinatorFenced.code(),
        }
    }
}

impl PartitionError {
    /// The Kafka error code this failure is reported as.
    pub(crate) fn code(&self) -> i16 {
        match self {
            PartitionError::Closed => {
                kafka_protocol::error::ResponseError::NotLeaderOrFollower.code()
            }
            PartitionError::Storage(e) => crate::errors::storage_error_code(e),
            PartitionError::Sequence(e) => e.code(),
            PartitionError::NotLeader => {
                kafka_protocol::error::ResponseError::NotLeaderOrFollower.code()
            }
            PartitionError::VerificationLost => {
                kafka_protocol::error::ResponseError::InvalidTxnState.code()
            }
            PartitionError::StaleMarker(e) => e.code(),
        }
    }
}

/// Where a produce landed: its base offset, the broker's timestamp for LogAppendTime
/// topics (else -1) and the log start offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Appended {
    pub(crate) base_offset: i64,
    pub(crate) log_append_time_ms: i64,
    pub(crate) log_start_offset: i64,
    /// One past the last offset of the batches (for acks=all: the high watermark to
    /// wait for). For a retried duplicate, the log end offset at the time.
    pub(crate) end_offset: i64,
    /// The leader epoch the batches were written in.
    pub(crate) leader_epoch: i32,
}

pub(crate) struct Partition {
    pub(crate) topic: String,
    pub(crate) topic_id: Uuid,
    pub(crate) index: i32,
    leader_epoch: AtomicI32,
    /// `None` once the partition was deleted or the node shut down.
    log: Mutex<Option<Log>>,
    /// The log's durability, usable without the log lock: fsyncs and checkpoint writes
    /// the owner waits for happen through it on blocking threads.
    durability: DurabilityHandle,
    /// Fetches waiting for data; each is woken once by the next append.
    waiters: Mutex<Vec<Arc<Notify>>>,
    /// Role, ISR and follower progress (see `replication.rs`). Lock order: `log` first.
    pub(super) repl: Mutex<ReplicaState>,
    /// The high watermark and leadership, for acks=all produces waiting on them.
    pub(super) hw_watch: watch::Sender<HwSnapshot>,
    /// Transactional producers being verified with their coordinator (Kafka's
    /// verification guard, KIP-890): producer id -> guard. A marker for the producer
    /// removes its guard, so a batch verified before the marker and appended after it
    /// is refused instead of opening a transaction nobody decides.
    verifying: Mutex<HashMap<i64, u64>>,
    next_guard: AtomicU64,
    /// Told of every storage error of this log (a failed disk stops the node).
    dir_failures: Option<Arc<LogDirFailures>>,
}

/// Producers being verified per partition at most; beyond it the guards are reset (the
/// producers being verified then retry).
const MAX_VERIFYING: usize = 100_000;

impl Partition {
    pub(crate) fn new(
        topic: String,
        topic_id: Uuid,
        index: i32,
        leader_epoch: i32,
        log: Log,
    ) -> Self {
        let snapshot = HwSnapshot {
            high_watermark: log.high_watermark(),
            low_watermark: log.log_start_offset(),
            leader_epoch,
            is_leader: true,
            isr_len: 1,
            min_isr: 1,
        };
        Partition {
            topic,
            topic_id,
            index,
            leader_epoch: AtomicI32::new(leader_epoch),
            durability: log.durability(),
            log: Mutex::new(Some(log)),
            waiters: Mutex::new(Vec::new()),
            repl: Mutex::new(ReplicaState::sole_leader(i32::MIN, leader_epoch)),
            hw_watch: watch::Sender::new(snapshot),
            verifying: Mutex::new(HashMap::new()),
            next_guard: AtomicU64::new(1),
            dir_failures: None,
        }
    }

    /// Reports this log's storage errors to `failures`.
    pub(crate) fn reporting_disk_failures_to(mut self, failures: Arc<LogDirFailures>) -> Self {
        self.dir_failures = Some(failures);
        self
    }

    /// Passes `err` on, reporting it first if it says the disk failed.
    pub(crate) fn noted(&self, err: StorageError) -> StorageError {
        if let Some(failures) = &self.dir_failures {
            failures.report(self.durability.dir(), &err);
        }
        err
    }

    /// Writes the log's checkpoint files on this thread (blocking), for a change that
    /// must be on disk before it is answered; a disk failure is reported.
    pub(crate) fn write_checkpoints(&self) -> Result<(), StorageError> {
        self.durability
            .write_checkpoints()
            .map_err(|e| self.noted(e))
    }

    /// Removes the clean-shutdown marker durably on this thread (blocking); a disk
    /// failure is reported.
    pub(crate) fn remove_clean_shutdown_marker(&self) -> Result<(), StorageError> {
        self.durability
            .remove_clean_shutdown_marker()
            .map_err(|e| self.noted(e))
    }

    /// [`Partition::noted`] for a result of work done on the log outside `with_log`.
    pub(super) fn noting<T>(&self, result: Result<T, PartitionError>) -> Result<T, PartitionError> {
        result.map_err(|e| match e {
            PartitionError::Storage(err) => PartitionError::Storage(self.noted(err)),
            other => other,
        })
    }

    fn lock_verifying(&self) -> MutexGuard<'_, HashMap<i64, u64>> {
        self.verifying.locked()
    }

    /// Starts verifying `producer_id`'s transactional batch with its coordinator; the
    /// guard to append it with ([`Partition::append_verified`]).
    pub(crate) fn begin_verification(&self, producer_id: i64) -> u64 {
        let guard = self.next_guard.fetch_add(1, Ordering::Relaxed);
        let mut verifying = self.lock_verifying();
        if verifying.len() >= MAX_VERIFYING && !verifying.contains_key(&producer_id) {
            verifying.clear();
        }
        verifying.insert(producer_id, guard);
        guard
    }

    /// The verification failed: the guard goes.
    pub(crate) fn end_verification(&self, producer_id: i64, guard: u64) {
        let mut verifying = self.lock_verifying();
        if verifying.get(&producer_id) == Some(&guard) {
            verifying.remove(&producer_id);
        }
    }

    /// [`Partition::append_deferring_sync`] of a verified transactional batch: refused
    /// when a marker for the producer landed since its verification began.
    pub(crate) fn append_verified(
        &self,
        batches: &mut [u8],
        now_ms: i64,
        producer_id: i64,
        guard: u64,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        self.append_guarded(
            batches,
            now_ms,
            AppendOrigin::Client,
            Some((producer_id, guard)),
        )
    }

    pub(crate) fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    pub(crate) fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch.store(epoch, Ordering::Release);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Option<Log>> {
        // A panic while holding the lock cannot leave the log half-written (each
        // append validates before writing), so a poisoned lock is still usable.
        self.log.locked()
    }

    /// The log's durability handle (for work done off the log lock).
    pub(crate) fn durability(&self) -> &DurabilityHandle {
        &self.durability
    }

    /// Readies the log for writes without syncing on the caller's async worker: after
    /// a clean open, the clean-shutdown marker must go (a directory fsync) before the
    /// first write, and this does it on a blocking thread. Once done (or for a log that
    /// was not opened clean) it costs one atomic load. Should it fail, the append tries
    /// again itself and reports the error.
    pub(crate) async fn ready_for_writes(&self) {
        if !self.durability.clean_shutdown_marker_present() {
            return;
        }
        let durability = self.durability.clone();
        let removed =
            tokio::task::spawn_blocking(move || durability.remove_clean_shutdown_marker());
        match removed.await.map(|r| r.map_err(|e| self.noted(e))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "removing the clean-shutdown marker failed");
            }
            Err(e) => {
                tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "removing the clean-shutdown marker panicked");
            }
        }
    }

    /// Runs `f` on the open log.
    pub(crate) fn with_log<T>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<T, StorageError>,
    ) -> Result<T, PartitionError> {
        let mut guard = self.lock();
        let log = guard.as_mut().ok_or(PartitionError::Closed)?;
        f(log).map_err(|e| self.noted(e).into())
    }

    /// [`Partition::append_deferring_sync`], waiting for the fsync on this thread (the
    /// tests' way).
    #[cfg(test)]
    pub(crate) fn append(
        &self,
        batches: &mut [u8],
        now_ms: i64,
    ) -> Result<Appended, PartitionError> {
        let (appended, sync) = self.append_from(batches, now_ms, AppendOrigin::Client)?;
        if let Some(sync) = sync {
            sync.wait()?;
        }
        Ok(appended)
    }

    /// Appends a producer's batches as leader, after the idempotence check (a retried
    /// batch is answered with its original offset, not written again). On a cluster of
    /// one the appended records are committed at once: the high watermark moves to the
    /// log end. An fsync `flush.messages` asks for is not waited for here but handed
    /// back: the produce path waits for it off the async workers in the delayed reply,
    /// so the connection reads (and appends) its next request meanwhile and pipelined
    /// requests share fdatasyncs.
    pub(crate) fn append_deferring_sync(
        &self,
        batches: &mut [u8],
        now_ms: i64,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        self.append_from(batches, now_ms, AppendOrigin::Client)
    }

    /// A coordinator's own records (`control`: its transaction markers) with the
    /// `flush.messages` fsync handed back as for [`Partition::append_deferring_sync`].
    pub(crate) fn append_for_coordinator(
        &self,
        batches: &mut [u8],
        now_ms: i64,
        control: bool,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        let origin = if control {
            AppendOrigin::Coordinator
        } else {
            AppendOrigin::Client
        };
        self.append_from(batches, now_ms, origin)
    }

    /// Appends batches the broker wrote itself: transaction markers (control batches,
    /// which a client may not send), with the fsync handed back as for
    /// [`Partition::append_deferring_sync`].
    pub(crate) fn append_control(
        &self,
        batches: &mut [u8],
        now_ms: i64,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        self.append_from(batches, now_ms, AppendOrigin::Coordinator)
    }

    fn append_from(
        &self,
        batches: &mut [u8],
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        self.append_guarded(batches, now_ms, origin, None)
    }

    fn append_guarded(
        &self,
        batches: &mut [u8],
        now_ms: i64,
        origin: AppendOrigin,
        guard: Option<(i64, u64)>,
    ) -> Result<(Appended, Option<PendingSync>), PartitionError> {
        let opts = AppendOptions {
            leader_epoch: self.leader_epoch(),
            now_ms,
            origin,
        };
        // Refused before the log lock too: a follower's lock may be held by a
        // truncation writing its checkpoints (checked again under the lock).
        if !self.repl_state().is_leader() {
            return Err(PartitionError::NotLeader);
        }
        let mut locked = self.lock();
        let log = locked.as_mut().ok_or(PartitionError::Closed)?;
        if !self.repl_state().is_leader() {
            return Err(PartitionError::NotLeader);
        }
        // Checked and settled under the log lock, so no marker slips in between.
        if let Some((producer_id, guard)) = guard {
            if self.lock_verifying().remove(&producer_id) != Some(guard) {
                return Err(PartitionError::VerificationLost);
            }
        }
        if origin == AppendOrigin::Coordinator {
            // A malformed batch is refused by the append itself.
            if let Ok(header) = tidelog_storage::BatchHeader::new(batches) {
                StaleMarker::check(log, batches, &header)?;
                self.lock_verifying().remove(&header.producer_id());
            }
        }
        let info = match idempotence::check(log.producer_state(), batches) {
            Ok(SequenceCheck::Duplicate { first_offset }) => {
                let duplicate = Appended {
                    base_offset: first_offset,
                    log_append_time_ms: -1,
                    log_start_offset: log.log_start_offset(),
                    end_offset: log.log_end_offset(),
                    leader_epoch: opts.leader_epoch,
                };
                return Ok((duplicate, None));
            }
            Ok(SequenceCheck::Append) => log
                .append_group_commit(batches, &opts)
                .map_err(|e| self.noted(e))?,
            Err(CheckError::Sequence(e)) => return Err(e.into()),
            Err(CheckError::Storage(e)) => return Err(self.noted(e).into()),
        };
        let (info, pending_sync) = info;
        // On a cluster of one (or with every follower caught up) this commits at once.
        self.advance_high_watermark(log);
        drop(locked);
        self.wake_waiters();
        let appended = Appended {
            base_offset: info.first_offset,
            log_append_time_ms: info.log_append_time_ms,
            log_start_offset: info.log_start_offset,
            end_offset: info.last_offset.saturating_add(1),
            leader_epoch: opts.leader_epoch,
        };
        Ok((appended, pending_sync))
    }

    pub(crate) fn offsets(&self) -> Result<Offsets, PartitionError> {
        self.with_log(|log| {
            let hw = log.high_watermark();
            Ok(Offsets {
                log_start: log.log_start_offset(),
                high_watermark: hw,
                last_stable: last_stable_offset(log),
            })
        })
    }

    /// Reads whole batches from `offset`, never past the high watermark (or the last
    /// stable offset for read_committed).
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<PartitionRead, PartitionError> {
        self.with_log(|log| {
            let hw = log.high_watermark();
            let lso = last_stable_offset(log);
            let bound = if read_committed { lso } else { hw };
            let read = log.read(offset, max_bytes, bound)?;
            // Everything returned lies below the bound, so the aborted transactions
            // that matter are those overlapping [first batch, bound).
            let aborted = if read_committed && read.slice.is_some() {
                log.aborted_txns(read.first_batch_offset.min(offset), bound)
            } else {
                Vec::new()
            };
            Ok(PartitionRead {
                slice: read.slice,
                high_watermark: hw,
                last_stable_offset: lso,
                log_start_offset: log.log_start_offset(),
                aborted,
            })
        })
    }

    /// Parks a long-poll fetch: `notify` fires on the next append.
    pub(crate) fn park(&self, notify: &Arc<Notify>) {
        let mut waiters = self.waiters.locked();
        waiters.retain(|w| Arc::strong_count(w) > 1);
        waiters.push(Arc::clone(notify));
    }

    pub(super) fn wake_waiters(&self) {
        let parked = std::mem::take(&mut *self.waiters.locked());
        for waiter in parked {
            waiter.notify_one();
        }
    }

    pub(crate) fn set_config(&self, config: LogConfig) {
        if let Some(log) = self.lock().as_mut() {
            log.set_config(config);
        }
    }

    /// Takes the log out for closing elsewhere (many at once at shutdown); parked
    /// fetches wake and find the partition closed.
    pub(crate) fn take_log(&self) -> Option<Log> {
        let log = self.lock().take();
        self.wake_waiters();
        log
    }

    /// Closes the log and renames its directory aside for deletion (topic deletion, or a
    /// re-created topic's old data); answers the renamed directory and how long to wait
    /// (`file.delete.delay.ms`) before removing it.
    pub(crate) fn rename_for_deletion(
        &self,
    ) -> Result<Option<(std::path::PathBuf, std::time::Duration)>, StorageError> {
        let log = self.lock().take();
        self.wake_waiters();
        let Some(log) = log else {
            return Ok(None);
        };
        let delay = std::time::Duration::from_millis(log.config().file_delete_delay_ms);
        Ok(Some((log.rename_for_deletion()?, delay)))
    }
}

/// The last stable offset: below it every transaction is decided. It is the high
/// watermark unless an open transaction started earlier.
fn last_stable_offset(log: &Log) -> i64 {
    let hw = log.high_watermark();
    log.producer_state()
        .first_unstable_offset()
        .map_or(hw, |first| first.min(hw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_storage::BatchBuilder;

    fn partition() -> (tempfile::TempDir, Partition) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(&dir.path().join("t-0"), LogConfig::default()).unwrap();
        (dir, Partition::new("t".into(), Uuid::nil(), 0, 0, log))
    }

    fn txn_batch(producer_id: i64, first_seq: i32, values: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new()
            .producer(producer_id, 0, first_seq)
            .transactional(true);
        for v in values {
            b = b.kv(Some(b"k"), Some(v.as_bytes()), 1000);
        }
        b.build().unwrap()
    }

    fn marker(producer_id: i64, commit: bool) -> Vec<u8> {
        BatchBuilder::control_marker(producer_id, 0, commit, 0, 1000)
            .build()
            .unwrap()
    }

    fn plain(values: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for v in values {
            b = b.kv(Some(b"k"), Some(v.as_bytes()), 1000);
        }
        b.build().unwrap()
    }

    #[test]
    fn read_committed_stops_at_the_first_open_transaction() {
        let (_dir, p) = partition();
        p.append(&mut plain(&["a", "b"]), 1000).unwrap(); // offsets 0-1
        p.append(&mut txn_batch(7, 0, &["t1", "t2", "t3"]), 1000)
            .unwrap(); // 2-4
        p.append(&mut plain(&["c"]), 1000).unwrap(); // 5
        let o = p.offsets().unwrap();
        assert_eq!((o.high_watermark, o.last_stable), (6, 2));
        let committed = p.read(0, 1 << 20, true).unwrap();
        assert_eq!(committed.last_stable_offset, 2);
        assert_eq!(committed.high_watermark, 6);
        // Only the batch below the LSO comes back.
        assert!(committed.slice.is_some());
        assert!(p.read(2, 1 << 20, true).unwrap().slice.is_none());
        assert!(p.read(2, 1 << 20, false).unwrap().slice.is_some());

        p.append_control(&mut marker(7, true), 1000).unwrap(); // 6
        let o = p.offsets().unwrap();
        assert_eq!((o.high_watermark, o.last_stable), (7, 7));
        let after = p.read(2, 1 << 20, true).unwrap();
        assert!(after.slice.is_some());
        assert!(after.aborted.is_empty(), "a commit is not an abort");
    }

    #[test]
    fn aborted_transactions_of_the_read_range_are_reported() {
        let (_dir, p) = partition();
        p.append(&mut txn_batch(7, 0, &["x", "y"]), 1000).unwrap(); // 0-1
        p.append(&mut txn_batch(8, 0, &["z"]), 1000).unwrap(); // 2
        p.append_control(&mut marker(7, false), 1000).unwrap(); // 3
                                                                // Producer 8 is still open: the LSO stays at its first offset.
        assert_eq!(p.offsets().unwrap().last_stable, 2);
        let read = p.read(0, 1 << 20, true).unwrap();
        assert_eq!(read.last_stable_offset, 2);
        assert_eq!(read.aborted.len(), 1);
        assert_eq!(
            (read.aborted[0].producer_id, read.aborted[0].first_offset),
            (7, 0)
        );
        p.append_control(&mut marker(8, false), 1000).unwrap(); // 4
        let read = p.read(0, 1 << 20, true).unwrap();
        assert_eq!(read.last_stable_offset, 5);
        let aborted: Vec<(i64, i64)> = read
            .aborted
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect();
        assert_eq!(aborted, vec![(7, 0), (8, 2)]);
        // read_uncommitted gets no aborted list.
        assert!(p.read(0, 1 << 20, false).unwrap().aborted.is_empty());
    }

    #[test]
    fn clients_may_not_append_markers() {
        let (_dir, p) = partition();
        assert!(p.append(&mut marker(7, true), 1000).is_err());
        assert!(p.append_control(&mut marker(7, true), 1000).is_ok());
    }
}
