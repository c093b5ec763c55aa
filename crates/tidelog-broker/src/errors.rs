//! How internal failures become Kafka error codes.

use kafka_protocol::error::ResponseError;
use tidelog_storage::StorageError;

/// The Kafka error code a storage failure is reported as.
pub(crate) fn storage_error_code(err: &StorageError) -> i16 {
    let code = match err {
        StorageError::CorruptMessage(_) => ResponseError::CorruptMessage,
        StorageError::InvalidRecord(_) => ResponseError::InvalidRecord,
        StorageError::InvalidTimestamp(_) => ResponseError::InvalidTimestamp,
        StorageError::MessageTooLarge { .. } | StorageError::DecompressedTooLarge { .. } => {
            ResponseError::MessageTooLarge
        }
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        _ => ResponseError::KafkaStorageError,
    };
    code.code()
}
