//! The one error type of the codec, sorted by the Kafka error code it stands for.

/// One refused record of a batch, as a Produce v8+ response names it (KIP-467).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// Position of the record in its batch (0 for the first record).
    pub batch_index: i32,
    /// Why it was refused.
    pub message: String,
}

/// Everything that can be wrong with a RecordBatch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    /// Bytes that do not parse: a length past the end, a bad CRC, an unknown codec,
    /// undecompressible data, fields that do not fill their record. CORRUPT_MESSAGE.
    #[error("corrupt message: {0}")]
    Corrupt(String),
    /// A batch that parses but may not be stored here (a control batch from a client,
    /// offset deltas out of sequence, a keyless record on a compacted topic).
    /// INVALID_RECORD; `record_errors` names the refused records when the fault is theirs.
    #[error("invalid record: {message}")]
    Invalid {
        /// What is wrong, for the response's `error_message`.
        message: String,
        /// The records at fault; empty when the batch as a whole is.
        record_errors: Vec<RecordError>,
    },
    /// Records whose CreateTime timestamps fall outside the topic's window.
    /// INVALID_TIMESTAMP; `record_errors` names them.
    #[error("invalid timestamp: {message}")]
    InvalidTimestamp {
        /// What is wrong, for the response's `error_message`.
        message: String,
        /// The records at fault.
        record_errors: Vec<RecordError>,
    },
    /// A compressed batch whose records inflate past the allowed size. MESSAGE_TOO_LARGE.
    #[error("records inflate past the limit of {limit} bytes")]
    InflatedTooLarge {
        /// The limit in force.
        limit: usize,
    },
    /// A batch the builder cannot encode (no records, a field longer than i32::MAX).
    #[error("cannot build batch: {0}")]
    Unencodable(String),
}

impl RecordsError {
    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        RecordsError::Corrupt(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        RecordsError::Invalid {
            message: msg.into(),
            record_errors: Vec::new(),
        }
    }
}
