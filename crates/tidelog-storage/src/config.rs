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
#[derive(Debug, Clone, PartialEq, Eq)]
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
            file_delete_delay_ms: 60_000,
        }
    }
}

impl LogConfig {
    /// Segment size limit actually enforced: index positions are u32 and Kafka keeps them
    /// below `i32::MAX`, so larger settings are clamped.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }
}
