//! The one error type of the storage engine.

/// Why a batch was refused as INVALID_RECORD, and which of its records were at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRefusal {
    /// What is wrong, for the response's `error_message`.
    pub message: String,
    /// The refused records by position in their batch, as Produce v8+ responses name
    /// them (KIP-467); empty when the batch as a whole is at fault.
    pub record_errors: Vec<tidelog_records::RecordError>,
}

impl std::fmt::Display for RecordRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Everything that can go wrong in a partition log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Bytes that are not a well-formed RecordBatch v2: bad CRC, bad magic, a length that
    /// does not match the bytes present, a truncated batch.
    #[error("corrupt message: {0}")]
    CorruptMessage(String),
    /// A structurally valid batch whose content is not acceptable here (e.g. a control
    /// batch from a client, a record without a key in a compacted topic).
    #[error("invalid record: {0}")]
    InvalidRecord(RecordRefusal),
    /// CreateTime records timestamped outside `message.timestamp.before.max.ms` /
    /// `after.max.ms` of the broker's clock.
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(RecordRefusal),
    /// A compressed batch whose records inflate past the bound derived from
    /// `max.message.bytes` (see `tidelog_records::max_inflated_bytes`).
    #[error("compressed records inflate past {limit} bytes")]
    DecompressedTooLarge {
        /// The bound in force.
        limit: usize,
    },
    /// One batch is larger than `max.message.bytes`.
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge {
        /// Size of the offending batch in bytes.
        size: usize,
        /// The configured limit.
        max: u32,
    },
    /// A read or delete at an offset outside `[log_start, log_end]`.
    #[error("offset {offset} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The log start offset at the time of the request.
        log_start: i64,
        /// The log end offset at the time of the request.
        log_end: i64,
    },
    /// A follower append whose base offset does not continue the log.
    #[error("unexpected offset: expected at least {expected}, got {got}")]
    UnexpectedOffset {
        /// The smallest base offset that would have been accepted.
        expected: i64,
        /// The base offset that was presented.
        got: i64,
    },
    /// An argument that makes no sense for this log (e.g. a negative offset).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A partition directory's `partition.metadata` that does not parse: the directory is
    /// neither served nor deleted.
    #[error("{}: {reason}", path.display())]
    PartitionMetadata {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The operating system refused an I/O operation.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// True for an [`StorageError::OffsetOutOfRange`] below the log start offset.
    pub fn is_below_start(&self) -> bool {
        matches!(self, StorageError::OffsetOutOfRange { offset, log_start, .. } if offset < log_start)
    }

    /// True for an [`StorageError::OffsetOutOfRange`] above the log end offset.
    pub fn is_above_end(&self) -> bool {
        matches!(self, StorageError::OffsetOutOfRange { offset, log_end, .. } if offset > log_end)
    }

    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        StorageError::CorruptMessage(msg.into())
    }
}
