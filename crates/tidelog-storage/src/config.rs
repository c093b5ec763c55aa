//! Per-log configuration, mirroring the Kafka topic configs of the same names.

/// `cleanup.policy`: `delete`, `compact`, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Whole segments are deleted by `retention.ms` / `retention.bytes`.
    pub delete: bool,
    /// Closed segments are compacted to the newest record per key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

/// `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// Keep the producer's timestamps.
    #[default]
    CreateTime,
    /// Stamp each batch with the broker's clock on append.
    LogAppendTime,
}

/// The knobs of one partition log. Defaults are Kafka's.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment when the next batch would pass this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: preallocated size of each index file.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: log bytes between two sparse index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms`: delete closed segments whose newest timestamp is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest closed segments while the log is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many records; 1 = before every append returns.
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the oldest unflushed data is this old.
    pub flush_ms: u64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone survives compaction.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: segments newer than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: with CreateTime, how far in the past a
    /// record's timestamp may be; `i64::MAX` = any.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future. Unbounded by default
    /// here; the broker passes the topic's value (Kafka 4's default there is 1 h).
    pub message_timestamp_after_max_ms: i64,
    /// `max.compaction.lag.ms`: the longest a record stays uncompacted (the active
    /// segment rolls once its first append is this old, and the cleaner runs whatever
    /// the dirty ratio); `i64::MAX` = no bound.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: the share of a compacted log's cleanable bytes
    /// written since its last cleaning that makes it worth cleaning again.
    pub min_cleanable_dirty_ratio: f64,
    /// `segment.jitter.ms`: taken off `segment.ms`, a fixed share of it per segment.
    pub segment_jitter_ms: i64,
    /// `file.delete.delay.ms`: how long a directory renamed aside for deletion (see
    /// [`crate::rename_for_deletion`]) waits before its files are removed. The storage
    /// engine only carries it; whoever renames the directory removes it.
    pub file_delete_delay_ms: u64,
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
            cleanup_policy: CleanupPolicy::default(),
            delete_retention_ms: DAY_MS,
            min_compaction_lag_ms: 0,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            segment_jitter_ms: 0,
            file_delete_delay_ms: 60_000,
        }
    }
}

impl LogConfig {
    /// How long after its first append the segment based at `base_offset` is rolled:
    /// `segment.ms` less this segment's share of `segment.jitter.ms` (a fixed fraction
    /// derived from the base offset, so it survives restarts), and on a compacted log
    /// at most `max.compaction.lag.ms` so that the records can be compacted in time.
    pub(crate) fn roll_after_ms(&self, base_offset: i64) -> i64 {
        let jitter = if self.segment_jitter_ms > 0 {
            // A share in [0, 1024) of the jitter, spread by the base offset.
            let share = (base_offset as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54;
            i64::try_from(i128::from(self.segment_jitter_ms) * i128::from(share) / 1024)
                .unwrap_or(0)
        } else {
            0
        };
        let roll = self.segment_ms.saturating_sub(jitter).max(1);
        if self.cleanup_policy.compact {
            roll.min(self.max_compaction_lag_ms)
        } else {
            roll
        }
    }

    /// Segment size limit actually enforced: index positions are u32 and Kafka keeps them
    /// below `i32::MAX`, so larger settings are clamped.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }
}
