//! Offset records appended to `__consumer_offsets` but not yet committed (the high
//! watermark has not passed them). Kafka applies a commit to its offsets cache only
//! once the append is replicated; so does this: OffsetFetch never serves an offset that
//! a leader change could still truncate. Records wait here per partition in log order
//! and are replayed in that order as the high watermark passes them, whoever notices
//! first (the committing request after its wait, or the background tick), so the cache
//! always equals the replay of the committed log.
//!
//! Group metadata records are not held back: the membership state machine lives in
//! memory and the rebalance answers wait for their own write instead (`members`).

use std::collections::{HashMap, VecDeque};

use super::records::GroupRecord;
use crate::internal_topic::Written;

/// One append's held-back records.
#[derive(Debug)]
struct Held {
    written: Written,
    records: Vec<GroupRecord>,
}

#[derive(Debug, Default)]
pub(crate) struct Uncommitted {
    by_partition: HashMap<i32, VecDeque<Held>>,
}

impl Uncommitted {
    /// Holds `records`, written by the append `written`, until it is committed.
    pub(crate) fn hold(&mut self, written: Written, records: Vec<GroupRecord>) {
        if records.is_empty() {
            return;
        }
        self.by_partition
            .entry(written.partition)
            .or_default()
            .push_back(Held { written, records });
    }

    /// Takes, in log order, the held records of `partition` that lie below
    /// `high_watermark` and were written in `epoch` (the epoch the partition is still
    /// led in; records of an earlier epoch are dropped, as the partition is reloaded).
    pub(crate) fn take_committed(
        &mut self,
        partition: i32,
        epoch: i32,
        high_watermark: i64,
    ) -> Vec<GroupRecord> {
        let Some(queue) = self.by_partition.get_mut(&partition) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while let Some(front) = queue.front() {
            if front.written.epoch != epoch {
                queue.pop_front();
                continue;
            }
            if front.written.end > high_watermark {
                break;
            }
            if let Some(held) = queue.pop_front() {
                out.extend(held.records);
            }
        }
        if queue.is_empty() {
            self.by_partition.remove(&partition);
        }
        out
    }

    /// Drops the held records of `group` (its deletion, written after them, supersedes
    /// them: replaying the log removes the group with whatever they stored).
    pub(crate) fn discard_group(&mut self, partition: i32, group: &str) {
        if let Some(queue) = self.by_partition.get_mut(&partition) {
            for held in queue.iter_mut() {
                held.records.retain(|r| r.key.group() != group);
            }
        }
    }

    /// The partitions holding records.
    pub(crate) fn partitions(&self) -> Vec<i32> {
        self.by_partition.keys().copied().collect()
    }

    /// Drops what `partition` holds (this node no longer leads it).
    pub(crate) fn forget(&mut self, partition: i32) {
        self.by_partition.remove(&partition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::RecordKey;

    fn record(offset_partition: i32) -> GroupRecord {
        GroupRecord {
            key: RecordKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: offset_partition,
            },
            value: None,
        }
    }

    fn written(end: i64, epoch: i32) -> Written {
        Written {
            partition: 0,
            end,
            epoch,
        }
    }

    #[test]
    fn releases_in_log_order_only_below_the_high_watermark() {
        let mut u = Uncommitted::default();
        u.hold(written(1, 3), vec![record(1)]);
        u.hold(written(3, 3), vec![record(2), record(3)]);
        u.hold(written(4, 3), vec![record(4)]);
        assert!(u.take_committed(0, 3, 0).is_empty());
        assert_eq!(
            u.take_committed(0, 3, 3),
            vec![record(1), record(2), record(3)]
        );
        assert_eq!(u.partitions(), vec![0]);
        assert_eq!(u.take_committed(0, 3, 10), vec![record(4)]);
        assert!(u.partitions().is_empty());
    }

    #[test]
    fn records_of_an_older_epoch_are_dropped() {
        let mut u = Uncommitted::default();
        u.hold(written(1, 2), vec![record(1)]);
        u.hold(written(2, 3), vec![record(2)]);
        assert_eq!(u.take_committed(0, 3, 2), vec![record(2)]);
        u.hold(written(5, 3), vec![record(5)]);
        u.forget(0);
        assert!(u.take_committed(0, 3, 10).is_empty());
    }
}
