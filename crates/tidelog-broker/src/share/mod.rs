//! KIP-932 share groups at the partition leader: the share partitions (which records a
//! share group has in flight, see `partition`), the share sessions of ShareFetch and
//! ShareAcknowledge (`session`), and how a fetch acquires records from the log
//! (`fetch`). Share-group membership is the group coordinator's (`group::share`).
//!
//! The leader holds a share partition's state in memory and writes its durable part to
//! the share coordinator (`state`, `__share_group_state`) before it answers an
//! acknowledgement; a new leader (or a restart) starts from what was written.

pub(crate) mod dead_letter;
pub(crate) mod fetch;
pub(crate) mod partition;
#[cfg(test)]
mod partition_tests;
pub(crate) mod session;
pub(crate) mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use uuid::Uuid;

use crate::group_config::GroupConfigs;
use crate::poison::LockTolerant;
use partition::{ShareLimits, SharePartition};

/// Share partitions one node keeps at most (group x partition); beyond it a fetch for a
/// new one is refused until groups go away.
const MAX_SHARE_PARTITIONS: usize = 100_000;

/// Where a share partition with no state starts (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AutoOffsetReset {
    Earliest,
    Latest,
    /// The first record at most this old (the log end if none is).
    ByDuration(Duration),
}

impl AutoOffsetReset {
    /// From a checked group config value (anything else reads as Kafka's default,
    /// `latest`).
    pub(crate) fn parse(value: &str) -> AutoOffsetReset {
        match value {
            "earliest" => AutoOffsetReset::Earliest,
            v => v
                .strip_prefix("by_duration:")
                .and_then(crate::group_config::parse_iso_duration)
                .map_or(AutoOffsetReset::Latest, AutoOffsetReset::ByDuration),
        }
    }
}

/// What a share group works with. One function decides it for a group id
/// ([`group_share_config`]) so the group's own configs can override the broker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareGroupConfig {
    pub(crate) limits: ShareLimits,
    pub(crate) auto_offset_reset: AutoOffsetReset,
}

/// The share settings of `group_id`: its own group configs (KIP-932's
/// `share.record.lock.duration.ms`, `share.delivery.count.limit`,
/// `share.partition.max.record.locks`, `share.auto.offset.reset`; KIP-1191's
/// `errors.deadletterqueue.topic.name`) where it has them, else the broker's
/// `group.share.*` defaults.
pub(crate) fn group_share_config(configs: &GroupConfigs, group_id: &str) -> ShareGroupConfig {
    let (lock_ms, delivery_limit, max_locks) = configs.share_limits(group_id);
    ShareGroupConfig {
        limits: ShareLimits {
            lock_duration: Duration::from_millis(u64::try_from(lock_ms).unwrap_or(30_000)),
            delivery_limit: i16::try_from(delivery_limit).unwrap_or(i16::MAX),
            max_in_flight: max_locks.max(1),
            dead_letter: configs.dead_letter_topic(group_id).is_some(),
        },
        auto_offset_reset: AutoOffsetReset::parse(&configs.share_auto_offset_reset(group_id)),
    }
}

/// (group, topic id, partition).
pub(crate) type ShareKey = (String, Uuid, i32);

/// One share partition and the fetches parked on it.
pub(crate) struct ShareEntry {
    /// The leader epoch the state belongs to: a new leadership starts it again.
    pub(crate) leader_epoch: i32,
    /// The state epoch of the stored state it started from: an alteration of the
    /// group's offsets stores a newer one, and this state is then dropped.
    pub(crate) state_epoch: i32,
    pub(crate) state: Mutex<SharePartition>,
    waiters: Mutex<Vec<Weak<Notify>>>,
    /// Writes of the state go one at a time, each taking the state when its turn
    /// comes, so the last write carries the newest state.
    pub(crate) writes: tokio::sync::Mutex<()>,
}

impl ShareEntry {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, SharePartition> {
        self.state.locked()
    }

    /// Parks a share fetch: `notify` fires when a record becomes deliverable again.
    pub(crate) fn park(&self, notify: &Arc<Notify>) {
        let mut w = self.waiters.locked();
        w.retain(|n| n.strong_count() > 0);
        w.push(Arc::downgrade(notify));
    }

    /// Wakes the fetches parked here.
    pub(crate) fn wake(&self) {
        let waiters = std::mem::take(&mut *self.waiters.locked());
        for n in waiters.iter().filter_map(Weak::upgrade) {
            n.notify_one();
        }
    }
}

/// Every share partition this node leads, and the share sessions of its clients.
pub(crate) struct ShareManager {
    partitions: Mutex<HashMap<ShareKey, Arc<ShareEntry>>>,
    pub(crate) sessions: session::SessionCache,
    /// The dead-letter writer's queue (`dead_letter::run`), bounded.
    dead_letters: tokio::sync::mpsc::Sender<dead_letter::Job>,
    /// Its other end, until the writer takes it.
    dead_letter_queue: Mutex<Option<tokio::sync::mpsc::Receiver<dead_letter::Job>>>,
}

impl ShareManager {
    pub(crate) fn new(max_sessions: usize) -> ShareManager {
        let (dead_letters, queue) = tokio::sync::mpsc::channel(dead_letter::QUEUE);
        ShareManager {
            partitions: Mutex::new(HashMap::new()),
            sessions: session::SessionCache::new(max_sessions),
            dead_letters,
            dead_letter_queue: Mutex::new(Some(queue)),
        }
    }

    /// The dead-letter writer's end of the queue (once).
    pub(crate) fn take_dead_letter_queue(
        &self,
    ) -> Option<tokio::sync::mpsc::Receiver<dead_letter::Job>> {
        self.dead_letter_queue.locked().take()
    }

    /// Hands the records of `entry` waiting in ARCHIVING to the dead-letter writer
    /// (KIP-1191). A full queue gives them back for a later try.
    pub(crate) fn dispatch_dead_letters(&self, key: &ShareKey, entry: &Arc<ShareEntry>) {
        let now = std::time::Instant::now();
        let letters = entry.lock().dead_letters(dead_letter::MAX_PER_JOB, now);
        if letters.is_empty() {
            return;
        }
        let job = dead_letter::Job {
            key: key.clone(),
            entry: Arc::clone(entry),
            letters,
        };
        if let Err(e) = self.dead_letters.try_send(job) {
            let job = e.into_inner();
            let offsets: Vec<i64> = job.letters.iter().map(|l| l.offset).collect();
            tracing::debug!(group = %key.0, topic_id = %key.1, partition = key.2, "dead-letter queue full; records wait");
            entry
                .lock()
                .dead_letter_failed(&offsets, now + dead_letter::RETRY_DELAY);
        }
    }

    /// The share partition of `key` at `leader_epoch`, made with `start()` when it has
    /// no state yet (or its state is from another leadership; then the second part is
    /// true); `None` when the node keeps as many as it may.
    /// The share partition of `key` if it has state of `leader_epoch`.
    pub(crate) fn current(&self, key: &ShareKey, leader_epoch: i32) -> Option<Arc<ShareEntry>> {
        self.partitions
            .locked()
            .get(key)
            .filter(|e| e.leader_epoch == leader_epoch)
            .cloned()
    }

    pub(crate) fn entry(
        &self,
        key: &ShareKey,
        leader_epoch: i32,
        state_epoch: i32,
        start: impl FnOnce() -> SharePartition,
    ) -> Option<(Arc<ShareEntry>, bool)> {
        let mut map = self.partitions.locked();
        if let Some(e) = map.get(key).filter(|e| e.leader_epoch == leader_epoch) {
            return Some((Arc::clone(e), false));
        }
        if !map.contains_key(key) && map.len() >= MAX_SHARE_PARTITIONS {
            return None;
        }
        let e = Arc::new(ShareEntry {
            leader_epoch,
            state_epoch,
            state: Mutex::new(start()),
            waiters: Mutex::new(Vec::new()),
            writes: tokio::sync::Mutex::new(()),
        });
        if let Some(old) = map.insert(key.clone(), Arc::clone(&e)) {
            old.wake();
        }
        Some((e, true))
    }

    /// Each share partition of `group` this node holds state of: (topic id,
    /// partition, start offset).
    pub(crate) fn start_offsets(&self, group: &str) -> Vec<(Uuid, i32, i64)> {
        let entries: Vec<(Uuid, i32, Arc<ShareEntry>)> = self
            .partitions
            .locked()
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, topic, partition), e)| (*topic, *partition, Arc::clone(e)))
            .collect();
        entries
            .into_iter()
            .map(|(topic, partition, e)| (topic, partition, e.lock().start_offset()))
            .collect()
    }

    /// The share partition of `key` if it has state.
    pub(crate) fn existing(&self, key: &ShareKey) -> Option<Arc<ShareEntry>> {
        self.partitions.locked().get(key).cloned()
    }

    /// Drops `entry` (if it is still the one of `key`): its stored state was reset or
    /// deleted, so the next fetch starts the share partition again from the store.
    /// Fetches parked on it wake and find the new one.
    pub(crate) fn forget(&self, key: &ShareKey, entry: &Arc<ShareEntry>) {
        let mut map = self.partitions.locked();
        if map.get(key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            map.remove(key);
        }
        drop(map);
        entry.wake();
    }

    /// A member's session ended: what it held in `partitions` of `group` goes back.
    pub(crate) fn release(&self, group: &str, member: &str, partitions: &[(Uuid, i32)]) {
        for (topic, partition) in partitions {
            let key = (group.to_string(), *topic, *partition);
            if let Some(e) = self.existing(&key) {
                let freed = e.lock().release_member(member);
                if freed {
                    e.wake();
                }
                self.dispatch_dead_letters(&key, &e);
            }
        }
    }
}
