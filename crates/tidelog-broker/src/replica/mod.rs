//! The partitions this node hosts. The set follows the metadata image: whenever the
//! image changes, `apply_image` opens new partitions, re-configures changed ones and
//! removes deleted ones, so replaying metadata is the only way partitions come and go.

#[cfg(test)]
mod blocking_io_tests;
mod dir_deletion;
mod dir_failure;
mod fetch_backoff;
mod fetcher;
mod fetchers;
mod follower;
mod high_watermarks;
mod idempotence;
pub(crate) mod isr;
mod partition;
mod peer;
#[cfg(test)]
mod produce_validation_tests;
mod replication;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod stale_marker_tests;
mod state;
mod throttle;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::poison::{LockTolerant, RwLockTolerant};
use tidelog_controller::MetadataImage;
use tidelog_env::net::Transport;
use tidelog_storage::{BackgroundFlusher, CleanShutdownLists, DirClaim, Log, StorageError};
use tokio::sync::{watch, Notify};
use uuid::Uuid;

pub use dir_failure::LogDirFailure;
pub(crate) use dir_failure::LogDirFailures;
pub(crate) use partition::{Appended, Partition, PartitionError, StaleMarker};
pub(crate) use peer::{Peer, PeerError};
pub(crate) use replication::{replication_outcome, HwSnapshot, ReplicaError};
pub(crate) use state::Role;

use crate::config::BrokerConfig;
use crate::context::now_ms;
use crate::metrics::{ReplicationProbe, StorageOperation, StorageProbe};
use crate::topic_config;
use dir_deletion::DirDeleter;
use fetchers::Fetchers;
use high_watermarks::HighWatermarkFiles;
use state::ImageAssignment;

/// Threads that open logs at start-up (and close them at shutdown) in parallel.
const LOG_OPEN_CLOSE_THREADS: usize = 8;

pub(crate) type PartitionKey = (String, i32);

pub(crate) struct ReplicaManager {
    node_id: i32,
    /// The log directories, the data directory first (`log.dirs`).
    log_dirs: Vec<PathBuf>,
    partitions: RwLock<HashMap<PartitionKey, Arc<Partition>>>,
    /// Told of every fsync, retention deletion, compaction and background failure.
    probe: Arc<StorageProbe>,
    /// Where every hosted log hands its fsyncs (rolls, flush.ms, checkpoints); started
    /// and stopped by the server.
    flusher: BackgroundFlusher,
    /// One follower fetcher task per source broker.
    fetchers: Fetchers,
    /// Told of elections, ISR changes and truncations.
    replication: Arc<ReplicationProbe>,
    /// Wakes the ISR check early (a follower caught up).
    pub(crate) isr_wake: Notify,
    /// Removes partition directories renamed aside for deletion, after their delay.
    deleter: DirDeleter,
    /// How this node reaches other brokers' inter-broker listener.
    inter_broker: Arc<dyn Transport>,
    /// Every partition's high watermark, one file per log directory.
    high_watermarks: HighWatermarkFiles,
    /// The log directories' lists of logs the last clean shutdown closed, taken
    /// (removed from disk) before the first log opens; `None` until then.
    clean_lists: Mutex<Option<CleanShutdownLists>>,
    /// Told of every storage error; the first failed disk stops the node.
    dir_failures: Arc<LogDirFailures>,
}

/// How many logs opened clean from a list one housekeeping pass (every
/// `log.flush.scheduler.interval.ms`, 1 s) has write their recovery-point and epochs
/// files: until then a crash rescans their last segment, which is all it costs.
const CHECKPOINT_CATCH_UP_PER_PASS: usize = 1_000;

impl ReplicaManager {
    pub(crate) fn new(
        node_id: i32,
        log_dirs: Vec<PathBuf>,
        probe: Arc<StorageProbe>,
        replication: Arc<ReplicationProbe>,
        transport: Arc<dyn Transport>,
        flusher: BackgroundFlusher,
    ) -> Self {
        let dir_failures = Arc::new(LogDirFailures::new(log_dirs.clone()));
        let (counted, reported) = (probe.flush_failure_observer(), dir_failures.observer());
        flusher.set_failure_observer(Some(Arc::new(move |dir, e| {
            counted(dir, e);
            reported(dir, e);
        })));
        ReplicaManager {
            node_id,
            dir_failures,
            log_dirs,
            partitions: RwLock::new(HashMap::new()),
            probe,
            flusher,
            fetchers: Fetchers::new(Arc::clone(&transport), Arc::clone(&replication)),
            inter_broker: transport,
            replication,
            isr_wake: Notify::new(),
            deleter: DirDeleter::default(),
            high_watermarks: HighWatermarkFiles::default(),
            clean_lists: Mutex::new(None),
        }
    }

    /// How this node connects to other brokers (secured as their inter-broker
    /// listener requires).
    pub(crate) fn inter_broker_transport(&self) -> &dyn Transport {
        &*self.inter_broker
    }

    /// The background task deleting renamed-aside partition directories (see
    /// `dir_deletion`): those of deleted or replaced partitions after their topic's
    /// `file.delete.delay.ms`, and those a previous run left after `startup_delay`
    /// (`log.segment.delete.delay.ms`), until `shutdown`.
    pub(crate) async fn run_deletions(
        &self,
        startup_delay: std::time::Duration,
        shutdown: watch::Receiver<bool>,
    ) {
        self.deleter
            .run(self.log_dirs.clone(), startup_delay, shutdown)
            .await;
    }

    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let map = self.partitions.read_locked();
        map.get(&(topic.to_string(), partition)).cloned()
    }

    pub(crate) fn all(&self) -> Vec<Arc<Partition>> {
        let map = self.partitions.read_locked();
        map.values().cloned().collect()
    }

    /// Where storage errors are reported; resolves once a log directory failed.
    pub(crate) fn dir_failures(&self) -> &Arc<LogDirFailures> {
        &self.dir_failures
    }

    /// The log directories, the data directory first.
    pub(crate) fn log_dirs(&self) -> &[PathBuf] {
        &self.log_dirs
    }

    /// Where each partition about to be opened lives: the log directory already holding
    /// its directory, else (a new replica) the one holding the fewest partitions, as
    /// Kafka places them; ties go to the earlier directory in `log.dirs`.
    fn place(&self, keys: &[&PartitionKey]) -> Vec<PathBuf> {
        let name = |key: &PartitionKey| format!("{}-{}", key.0, key.1);
        if let [only] = self.log_dirs.as_slice() {
            return keys.iter().map(|key| only.join(name(key))).collect();
        }
        let mut hosted: Vec<usize> = vec![0; self.log_dirs.len()];
        for p in self.all() {
            let parent = p.with_log(|log| Ok(log.dir().parent().map(Path::to_path_buf)));
            if let Ok(Some(parent)) = parent {
                if let Some(i) = self.log_dirs.iter().position(|d| *d == parent) {
                    hosted[i] += 1;
                }
            }
        }
        let found: Vec<Option<usize>> = keys
            .iter()
            .map(|key| {
                let holders: Vec<usize> = (0..self.log_dirs.len())
                    .filter(|&i| self.log_dirs[i].join(name(key)).is_dir())
                    .collect();
                if holders.len() > 1 {
                    tracing::warn!(
                        topic = %key.0, partition = key.1,
                        dirs = ?holders.iter().map(|&i| &self.log_dirs[i]).collect::<Vec<_>>(),
                        "partition directory found in several log directories: serving the first"
                    );
                }
                holders.first().copied()
            })
            .collect();
        for i in found.iter().flatten() {
            hosted[*i] += 1;
        }
        keys.iter()
            .zip(found)
            .map(|(key, found)| {
                let i = found.unwrap_or_else(|| {
                    let fewest = (0..hosted.len()).min_by_key(|&i| hosted[i]).unwrap_or(0);
                    hosted[fewest] += 1;
                    fewest
                });
                self.log_dirs[i].join(name(key))
            })
            .collect()
    }

    /// Brings the hosted partitions in line with the metadata image.
    pub(crate) fn apply_image(
        &self,
        image: &MetadataImage,
        broker: &BrokerConfig,
    ) -> Result<(), StorageError> {
        let mut wanted: HashMap<PartitionKey, (Uuid, ImageAssignment, tidelog_storage::LogConfig)> =
            HashMap::new();
        for topic in image.topics() {
            let config = topic_config::log_config(broker, &topic.configs);
            let min_isr = min_insync_replicas(broker, &topic.configs);
            for (index, p) in &topic.partitions {
                if p.replicas.contains(&self.node_id) {
                    let assignment = ImageAssignment::of(p, min_isr);
                    wanted.insert(
                        (topic.name.clone(), *index),
                        (topic.topic_id, assignment, config.clone()),
                    );
                }
            }
        }
        // The map's lock is held only to swap entries: opening or deleting logs (disk
        // work, 50 partitions when __consumer_offsets appears) happens outside it, so
        // produces and fetches to other partitions carry on meanwhile. Calls are
        // serialised by the metadata manager.
        let mut to_open = Vec::new();
        let mut to_assign = Vec::new();
        let stale: Vec<Arc<Partition>> = {
            let mut map = self.partitions.write_locked();
            // Removed, or re-created under the same name with a new id: delete the old data.
            let stale_keys: Vec<PartitionKey> = map
                .iter()
                .filter(|(key, p)| wanted.get(*key).is_none_or(|(id, _, _)| *id != p.topic_id))
                .map(|(key, _)| key.clone())
                .collect();
            let stale = stale_keys
                .iter()
                .filter_map(|key| map.remove(key))
                .collect();
            for (key, (topic_id, assignment, config)) in wanted {
                match map.get(&key) {
                    Some(p) => {
                        p.set_config(config);
                        to_assign.push((Arc::clone(p), assignment));
                    }
                    None => to_open.push((key, topic_id, assignment, config)),
                }
            }
            stale
        };
        for (p, assignment) in to_assign {
            self.assign(&p, &assignment, now_ms(), false);
        }
        for p in stale {
            // Renamed now, so the name is free for a re-created topic; the files go later.
            if let Some((renamed, delay)) = p.rename_for_deletion()? {
                tracing::info!(
                    topic = %p.topic, partition = p.index, dir = %renamed.display(),
                    delay_ms = delay.as_millis() as u64,
                    "partition removed; its directory is deleted after file.delete.delay.ms"
                );
                self.deleter.schedule(renamed, delay);
            }
        }
        // Opening is mostly waiting on the disk (checkpoints, index maps, a crash
        // rescan), so a node with many partitions opens them on a few threads at once.
        self.high_watermarks.load_once(&self.log_dirs);
        let keys: Vec<&PartitionKey> = to_open.iter().map(|(key, _, _, _)| key).collect();
        let dirs = self
            .place(&keys)
            .into_iter()
            .zip(&to_open)
            .map(|(dir, (_, topic_id, _, config))| (dir, *topic_id, config.clone()))
            .collect();
        let mut clean_lists = self.clean_lists.locked();
        let clean = match &mut *clean_lists {
            Some(taken) => taken,
            None => {
                let taken = CleanShutdownLists::take(&self.log_dirs)?;
                tracing::info!(logs = taken.len(), "took the lists of logs closed cleanly");
                clean_lists.insert(taken)
            }
        };
        let opened = tidelog_storage::open_partition_logs(dirs, clean, LOG_OPEN_CLOSE_THREADS);
        drop(clean_lists);
        let mut adopted = Vec::new();
        for ((key, topic_id, assignment, config), log) in to_open.into_iter().zip(opened) {
            let (mut log, claim) = log?;
            self.high_watermarks.restore(&key, &mut log, &claim);
            match claim {
                DirClaim::Created | DirClaim::Owned => {}
                DirClaim::Adopted => adopted.push(format!("{}-{}", key.0, key.1)),
                DirClaim::Replaced { found, moved_to } => {
                    let delay = std::time::Duration::from_millis(config.file_delete_delay_ms);
                    tracing::warn!(
                        topic = %key.0, partition = key.1, %topic_id, found_topic_id = %found,
                        moved_to = %moved_to.display(), delay_ms = delay.as_millis() as u64,
                        "partition directory belonged to another topic id: renamed aside \
                         (deleted after file.delete.delay.ms), serving a fresh empty log"
                    );
                    self.deleter.schedule(moved_to, delay);
                }
            }
            log.set_flush_observer(Some(self.probe.flush_observer()));
            log.set_sync_failure_observer(Some(self.dir_failures.observer()));
            log.set_background_flusher(Some(self.flusher.clone()));
            // A sole in-sync replica leading commits its whole log here (HW = LEO).
            let p = Partition::new(key.0.clone(), topic_id, key.1, assignment.leader_epoch, log)
                .hosted_by(self.node_id)
                .reporting_disk_failures_to(Arc::clone(&self.dir_failures));
            let p = Arc::new(p);
            // The clock is read per partition: opening 50 logs can take long enough that
            // a time read before the first would already count against the followers.
            self.assign(&p, &assignment, now_ms(), true);
            let mut map = self.partitions.write_locked();
            map.insert(key, p);
        }
        if !adopted.is_empty() {
            tracing::info!(
                count = adopted.len(), partitions = %adopted.join(","),
                "adopted partition directories of an earlier release (no partition.metadata): \
                 wrote their topic ids"
            );
        }
        self.fetchers
            .reconcile(image, &self.all(), broker, self.node_id);
        Ok(())
    }

    /// Adopts `a` for `p`; `opened` when the partition was opened for this image (its
    /// first role is no election).
    fn assign(&self, p: &Partition, a: &ImageAssignment, now: i64, opened: bool) {
        // Whether this node was in the ISR as it knew it before this image: a leader
        // that was not has been elected uncleanly (records acknowledged may be lost)...
        let was_in_sync = p.in_known_isr();
        // ...unless others share its new ISR: an unclean election always leaves the new
        // leader alone in it, while a replica that joined the ISR and was elected in
        // the same metadata update (a reassignment completing onto a replica that just
        // caught up) sees both at once.
        let unclean = !was_in_sync && a.isr.as_slice() == [self.node_id];
        let transition = p.apply_assignment(a, now);
        if transition == state::Transition::Unchanged {
            return;
        }
        if opened {
            tracing::debug!(
                topic = %p.topic, partition = p.index, leader = a.leader,
                leader_epoch = a.leader_epoch, isr = ?a.isr, ?transition,
                "partition opened"
            );
            return;
        }
        tracing::info!(
            topic = %p.topic, partition = p.index, leader = a.leader,
            leader_epoch = a.leader_epoch, isr = ?a.isr, ?transition,
            "partition role changed"
        );
        if transition == state::Transition::BecameLeader {
            if unclean {
                tracing::warn!(
                    topic = %p.topic, partition = p.index, leader_epoch = a.leader_epoch,
                    "unclean leader election: this replica leads without having been in the ISR"
                );
            }
            self.replication.leader_elected(unclean);
        }
    }

    /// Closes every log cleanly; the clean-shutdown markers let the next start skip recovery.
    pub(crate) fn shutdown(&self) {
        self.fetchers.stop_all();
        let partitions: Vec<_> = {
            let mut map = self.partitions.write_locked();
            map.drain().map(|(_, p)| p).collect()
        };
        // Nothing moves them any more: the fetchers are stopped and no request is served.
        self.checkpoint_high_watermarks(&partitions);
        let (names, logs): (Vec<_>, Vec<Log>) = partitions
            .iter()
            .filter_map(|p| p.take_log().map(|log| ((p.topic.clone(), p.index), log)))
            .unzip();
        let closed = tidelog_storage::close_logs(logs, LOG_OPEN_CLOSE_THREADS);
        for ((topic, partition), result) in names.into_iter().zip(closed) {
            if let Err(e) = result {
                tracing::error!(%topic, partition, error = %e, "closing log failed");
            }
        }
    }

    /// Writes each log directory's high-watermark file whose values changed (blocking).
    pub(crate) fn checkpoint_high_watermarks(&self, partitions: &[Arc<Partition>]) {
        for (dir, e) in self.high_watermarks.write(partitions) {
            self.probe.failed(StorageOperation::Flush);
            tracing::warn!(dir = %dir.display(), error = %e, "high watermark checkpoint failed");
            let file = dir.join(tidelog_storage::HIGH_WATERMARKS_FILE);
            self.dir_failures.report(&file, &StorageError::Io(e));
        }
    }

    /// One pass of the background housekeeping: segment.ms rolls, retention, flush.ms,
    /// and the checkpoint files of up to [`CHECKPOINT_CATCH_UP_PER_PASS`] logs opened
    /// clean from their log directory's list (spread out, so that a start with many
    /// partitions does not write them all at once beside the first produces).
    /// On retention passes it also checkpoints the offsets (so a crash rescans little)
    /// and forgets producers idle past `producer_expiration_ms`.
    pub(crate) fn housekeeping(
        &self,
        now_ms: i64,
        retention_due: bool,
        producer_expiration_ms: i64,
    ) {
        let mut catch_up = CHECKPOINT_CATCH_UP_PER_PASS;
        for p in self.all() {
            let result = p.with_log(|log| {
                if catch_up > 0 && log.checkpoint_if_stale()? {
                    catch_up -= 1;
                }
                log.roll_if_due(now_ms)?;
                if retention_due {
                    let deleted = log.apply_retention(now_ms)?;
                    if deleted > 0 {
                        self.probe.retention_deleted(deleted);
                        tracing::info!(dir = %log.dir().display(), deleted, "retention deleted segments");
                    }
                    log.expire_producers(now_ms, producer_expiration_ms);
                    log.write_checkpoints()?;
                }
                log.flush_if_due(now_ms)
            });
            if let Err(e) = result {
                if !matches!(e, PartitionError::Closed) {
                    self.probe.failed(StorageOperation::Housekeeping);
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "housekeeping failed");
                }
            }
        }
    }

    /// Compacts the partitions whose topic asks for it.
    pub(crate) fn clean(&self, now_ms: i64) {
        for p in self.all() {
            let result = p.with_log(|log| {
                if log.config().cleanup_policy.compact {
                    let stats = log.compact(now_ms)?;
                    self.probe.compacted(&stats);
                }
                Ok(())
            });
            if let Err(e) = result {
                if !matches!(e, PartitionError::Closed) {
                    self.probe.failed(StorageOperation::Compaction);
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "compaction failed");
                }
            }
        }
    }
}

/// min.insync.replicas of a topic: its own setting, else the broker default.
fn min_insync_replicas(
    broker: &BrokerConfig,
    overrides: &std::collections::BTreeMap<String, String>,
) -> usize {
    topic_config::effective(broker, overrides)
        .get("min.insync.replicas")
        .and_then(|(v, _)| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}
