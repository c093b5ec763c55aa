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

    /// True when the operating system says the disk under the log failed or cannot take
    /// more: an I/O error, a full disk or quota, a read-only or vanished device. Kafka
    /// takes the log directory offline on any such error, since the log's state on disk
    /// is no longer known. A refused batch, an offset out of range or a log closed under
    /// a request is not one.
    pub fn is_disk_failure(&self) -> bool {
        let StorageError::Io(e) = self else {
            return false;
        };
        if let Some(code) = e.raw_os_error() {
            return DISK_FAILURE_ERRNOS.contains(&code);
        }
        matches!(
            e.kind(),
            std::io::ErrorKind::StorageFull
                | std::io::ErrorKind::QuotaExceeded
                | std::io::ErrorKind::ReadOnlyFilesystem
        )
    }

    /// An I/O error copied from `e`, which its owner keeps (a sticky sync failure, a
    /// failed read of a file being sent): classified as `e` is.
    pub fn copied_io(e: &std::io::Error) -> StorageError {
        StorageError::Io(copy_io_error(e))
    }
}

/// The errno values that mean the device or filesystem failed, not the request.
const DISK_FAILURE_ERRNOS: [i32; 6] = [
    libc::EIO,
    libc::ENOSPC,
    libc::EDQUOT,
    libc::EROFS,
    libc::ENXIO,
    libc::ENODEV,
];

/// A copy of `e` for a second reader of the same failure (io::Error is not Clone):
/// an operating-system error keeps its errno, so the copy is classified as the
/// original was.
pub(crate) fn copy_io_error(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn disk_failures_are_the_errors_of_the_device_not_of_the_request() {
        let os = |code| StorageError::Io(io::Error::from_raw_os_error(code));
        for code in [libc::EIO, libc::ENOSPC, libc::EDQUOT, libc::EROFS] {
            assert!(os(code).is_disk_failure(), "errno {code}");
        }
        for code in [libc::ENOENT, libc::EINVAL, libc::EMFILE, libc::EACCES] {
            assert!(!os(code).is_disk_failure(), "errno {code}");
        }
        assert!(!StorageError::Io(io::Error::other("log is closed")).is_disk_failure());
        assert!(!StorageError::corrupt("bad crc").is_disk_failure());
        assert!(
            StorageError::Io(io::Error::new(io::ErrorKind::StorageFull, "full")).is_disk_failure()
        );
    }

    #[test]
    fn a_copied_error_is_classified_as_the_original() {
        let eio = io::Error::from_raw_os_error(libc::EIO);
        assert!(StorageError::Io(copy_io_error(&eio)).is_disk_failure());
        let other = io::Error::other("log is closed");
        let copy = copy_io_error(&other);
        assert_eq!(copy.to_string(), "log is closed");
        assert!(!StorageError::Io(copy).is_disk_failure());
    }
}
