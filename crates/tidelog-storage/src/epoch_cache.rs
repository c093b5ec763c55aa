//! Leader-epoch cache: the first offset written under each leader epoch.

/// One epoch and the first offset appended under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// Leader epoch.
    pub epoch: i32,
    /// First offset written in that epoch.
    pub start_offset: i64,
}

/// Epochs in increasing order with increasing start offsets; persisted to
/// `leader-epoch-checkpoint` whenever it changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub(crate) fn from_pairs(pairs: &[(i32, i64)]) -> Self {
        let mut cache = LeaderEpochCache::default();
        for &(epoch, start_offset) in pairs {
            cache.assign(epoch, start_offset);
        }
        cache
    }

    pub(crate) fn pairs(&self) -> Vec<(i32, i64)> {
        self.entries
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Records that `epoch` starts at `offset`; true if the cache changed.
    pub(crate) fn assign(&mut self, epoch: i32, offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            Some(last) if last.epoch >= epoch || last.start_offset > offset => false,
            _ => {
                self.entries.push(EpochEntry {
                    epoch,
                    start_offset: offset,
                });
                true
            }
        }
    }

    /// Removes epochs starting at or after `end` (log truncated to `end`).
    pub(crate) fn truncate_from_end(&mut self, end: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end);
        before != self.entries.len()
    }

    /// Drops epochs wholly below `start`, moving the survivor's start up to `start`.
    pub(crate) fn truncate_from_start(&mut self, start: i64) -> bool {
        let keep_from = self.entries.partition_point(|e| e.start_offset <= start);
        if keep_from == 0 {
            return false;
        }
        let changed = keep_from > 1 || self.entries[0].start_offset != start;
        self.entries.drain(..keep_from - 1);
        self.entries[0].start_offset = start;
        changed
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// OffsetForLeaderEpoch: the largest epoch `<= epoch` and the offset where it ended
    /// (the next epoch's start, or `log_end` for the latest). An epoch older than every
    /// one known ends where the first known one starts, as Kafka answers: a follower
    /// holding records of an epoch this log never had (or no longer has) must cut them,
    /// or it keeps records the leader does not have below offsets the leader reuses.
    /// `None` only when no epoch is known (an empty log).
    pub(crate) fn end_offset_for(&self, epoch: i32, log_end: i64) -> Option<(i32, i64)> {
        let idx = self.entries.partition_point(|e| e.epoch <= epoch);
        let Some(found) = idx.checked_sub(1).and_then(|i| self.entries.get(i)) else {
            return self
                .entries
                .first()
                .map(|first| (epoch, first.start_offset));
        };
        let end = self
            .entries
            .get(idx)
            .map_or(log_end, |next| next.start_offset);
        Some((found.epoch, end))
    }
}
