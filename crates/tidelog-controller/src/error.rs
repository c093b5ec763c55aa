//! Errors of the metadata log (`ControllerError`) and of topic requests (`TopicError`).

use std::path::PathBuf;

/// A failure of the metadata log or its files. None of these is caused by client input.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("metadata log I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file passed its checksum (or has no torn tail to cut) but cannot be understood:
    /// real damage or a newer format. Refusing to start is safer than forgetting topics.
    #[error("metadata file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("metadata record batch of {size} bytes exceeds the limit of {limit} bytes")]
    BatchTooLarge { size: usize, limit: usize },
    #[error("an empty batch of metadata records cannot be appended")]
    EmptyBatch,
    /// An earlier write failed and could not be rolled back; the log refuses writes
    /// until it is reopened (which cuts whatever partial frame was left).
    #[error("metadata log is offline after an earlier write failure")]
    Offline,
    #[error("metadata record could not be encoded: {0}")]
    Encode(String),
    /// The data directory belongs to another node (`meta.properties` says so).
    #[error("metadata directory belongs to node.id {stored}, but this node is configured as {configured}")]
    NodeIdMismatch { stored: i32, configured: i32 },
    /// A further log directory's `meta.properties` names another node or cluster.
    #[error("log directory {dir} belongs to {owner}, not to this node ({this})")]
    LogDirOfAnotherNode {
        dir: String,
        owner: String,
        this: String,
    },
    #[error("producer id space is exhausted")]
    ProducerIdsExhausted,
    #[error("snapshot at offset {snapshot:?} is ahead of the log's last offset {last:?}")]
    SnapshotAhead {
        snapshot: Option<u64>,
        last: Option<u64>,
    },
}

impl ControllerError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ControllerError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        ControllerError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Why a topic request (create, delete, create partitions, alter configs) was refused.
/// Each variant maps to exactly one Kafka error code, see [`TopicError::error_code`];
/// the `Display` text is meant for the response's `error_message`.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("Topic already exists.")]
    TopicAlreadyExists,
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
    #[error("{0}")]
    InvalidTopicException(String),
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    InvalidConfig(String),
    /// The request itself is inconsistent (e.g. both a partition count and a manual
    /// assignment, or a config named twice).
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    PolicyViolation(String),
    #[error("metadata log failure: {0}")]
    Storage(#[from] ControllerError),
}

impl TopicError {
    /// The Kafka protocol error code for this error.
    pub fn error_code(&self) -> i16 {
        match self {
            TopicError::UnknownTopicOrPartition => 3,
            TopicError::InvalidTopicException(_) => 17,
            TopicError::TopicAlreadyExists => 36,
            TopicError::InvalidPartitions(_) => 37,
            TopicError::InvalidReplicationFactor(_) => 38,
            TopicError::InvalidReplicaAssignment(_) => 39,
            TopicError::InvalidConfig(_) => 40,
            TopicError::InvalidRequest(_) => 42,
            TopicError::PolicyViolation(_) => 44,
            TopicError::Storage(_) => 56, // KAFKA_STORAGE_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_match_kafka() {
        assert_eq!(TopicError::TopicAlreadyExists.error_code(), 36);
        assert_eq!(TopicError::UnknownTopicOrPartition.error_code(), 3);
        assert_eq!(
            TopicError::InvalidTopicException(String::new()).error_code(),
            17
        );
        assert_eq!(
            TopicError::InvalidPartitions(String::new()).error_code(),
            37
        );
        assert_eq!(
            TopicError::InvalidReplicationFactor(String::new()).error_code(),
            38
        );
        assert_eq!(
            TopicError::InvalidReplicaAssignment(String::new()).error_code(),
            39
        );
        assert_eq!(TopicError::InvalidConfig(String::new()).error_code(), 40);
        assert_eq!(TopicError::InvalidRequest(String::new()).error_code(), 42);
        assert_eq!(TopicError::PolicyViolation(String::new()).error_code(), 44);
        assert_eq!(
            TopicError::Storage(ControllerError::Offline).error_code(),
            56
        );
    }
}
