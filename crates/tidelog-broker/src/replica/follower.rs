//! The follower side of a partition: what its next fetch asks for, appending what the
//! leader sent (with the leader's high watermark and log start), and truncating where
//! the leader says the logs diverge or the fetch offset fell out of its range.

use tidelog_storage::{Log, StorageError};

use super::partition::{Partition, PartitionError};
use super::state::Role;

/// A follower truncation: where the log ended before and after, and its HW before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Truncation {
    pub(crate) old_end: i64,
    pub(crate) new_end: i64,
    pub(crate) old_high_watermark: i64,
}

impl Truncation {
    /// Records below the old high watermark that were cut: acknowledged data lost to an
    /// unclean election.
    pub(crate) fn committed_records_lost(&self) -> i64 {
        (self.old_high_watermark - self.new_end).max(0)
    }
}

impl Partition {
    /// Follower: what the next fetch asks for: (fetch offset = LEO, last fetched epoch,
    /// log start offset).
    pub(crate) fn follower_position(&self) -> Result<(i64, i32, i64), PartitionError> {
        self.with_log(|log| {
            let epoch = log.leader_epochs().last().map_or(-1, |e| e.epoch);
            Ok((log.log_end_offset(), epoch, log.log_start_offset()))
        })
    }

    /// Follower: appends batches fetched from the leader (offsets as the leader assigned
    /// them) and takes the leader's high watermark, never above its own LEO. Returns the
    /// bytes appended. Refused unless this node still follows `leader` in `epoch`.
    ///
    /// Blocking, for the fetcher's blocking thread: what must be on disk before the
    /// next fetch reports this log (a `flush.messages` fsync, a log start the leader
    /// moved, so deleted records stay deleted) is synced after the log lock is released.
    pub(crate) fn append_replicated(
        &self,
        leader: i32,
        epoch: i32,
        records: &[u8],
        leader_hw: i64,
        leader_log_start: i64,
    ) -> Result<usize, PartitionError> {
        // Its storage errors are reported, as `with_log` reports those of other work.
        let appended = (|| {
            self.durability().remove_clean_shutdown_marker()?;
            let (bytes, pending_sync, start_moved) = {
                let mut guard = self.lock();
                let log = guard.as_mut().ok_or(PartitionError::Closed)?;
                {
                    let repl = self.repl_state();
                    if repl.role != (Role::Follower { leader }) || repl.leader_epoch != epoch {
                        return Err(PartitionError::NotLeader);
                    }
                }
                let (bytes, pending_sync) = if records.is_empty() {
                    (0, None)
                } else {
                    let (info, pending_sync) = log.append_as_follower_group_commit(records)?;
                    (info.bytes, pending_sync)
                };
                let start_moved = leader_log_start > log.log_start_offset()
                    && leader_log_start <= log.log_end_offset();
                if start_moved {
                    log.delete_records_before(leader_log_start)?;
                }
                let hw = leader_hw.min(log.log_end_offset());
                if hw > log.high_watermark() {
                    log.set_high_watermark(hw);
                }
                (bytes, pending_sync, start_moved)
            };
            if let Some(sync) = pending_sync {
                sync.wait()?;
            }
            if start_moved {
                self.durability().write_checkpoints()?;
            }
            Ok(bytes)
        })();
        self.noting(appended)
    }

    /// Follower: the leader says our log diverges after `(epoch, end)`; cut it to the
    /// last offset both logs agree on. Returns what was cut, if anything.
    pub(crate) fn truncate_to_divergence(
        &self,
        leader_epoch: i32,
        leader_end: i64,
    ) -> Result<Option<Truncation>, PartitionError> {
        self.with_log(|log| {
            let old_end = log.log_end_offset();
            let old_hw = log.high_watermark();
            let target = if leader_epoch < 0 || leader_end < 0 {
                old_hw
            } else {
                match log.end_offset_for_epoch(leader_epoch) {
                    Some((_, ours)) => ours.min(leader_end),
                    None => leader_end.min(old_hw),
                }
            };
            truncate(log, target, old_end, old_hw)
        })
    }

    /// Follower whose fetch offset the leader no longer has: below its log start the
    /// log restarts at the leader's start; above its end it is cut to the leader's HW.
    pub(crate) fn reset_out_of_range(
        &self,
        leader_log_start: i64,
        leader_hw: i64,
    ) -> Result<Option<Truncation>, PartitionError> {
        self.with_log(|log| {
            let old_end = log.log_end_offset();
            let old_hw = log.high_watermark();
            if leader_log_start >= 0 && old_end < leader_log_start {
                log.truncate_fully_and_start_at(leader_log_start)?;
                return Ok(None);
            }
            if leader_hw >= 0 && leader_hw < old_end {
                return truncate(log, leader_hw, old_end, old_hw);
            }
            Ok(None)
        })
    }
}

fn truncate(
    log: &mut Log,
    target: i64,
    old_end: i64,
    old_hw: i64,
) -> Result<Option<Truncation>, StorageError> {
    if target >= old_end {
        return Ok(None);
    }
    log.truncate_to(target.max(0))?;
    Ok(Some(Truncation {
        old_end,
        new_end: log.log_end_offset(),
        old_high_watermark: old_hw,
    }))
}
