//! Kafka error codes: thin helpers over `kafka_protocol`'s [`ResponseError`].

pub use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};

use crate::error::ProtocolError;

/// The "no error" code.
pub const NONE: i16 = 0;

/// The wire code of `e`.
pub fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The error a code stands for, `None` for 0 (no error). Unknown codes map to
/// `ResponseError::Unknown(code)`.
pub fn from_code(code: i16) -> Option<ResponseError> {
    code.err()
}

impl ProtocolError {
    /// The correlation id of the request this error belongs to, when it could be read,
    /// so a server can still answer instead of only closing the connection.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            ProtocolError::UnknownApiKey { correlation_id, .. } => *correlation_id,
            ProtocolError::MalformedHeader { correlation_id, .. } => Some(*correlation_id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_kafka() {
        assert_eq!(code(ResponseError::UnsupportedVersion), 35);
        assert_eq!(code(ResponseError::UnknownTopicOrPartition), 3);
        assert_eq!(code(ResponseError::CorruptMessage), 2);
        assert_eq!(code(ResponseError::KafkaStorageError), 56);
        assert_eq!(from_code(NONE), None);
        assert_eq!(from_code(1), Some(ResponseError::OffsetOutOfRange));
        assert_eq!(from_code(-1), Some(ResponseError::UnknownServerError));
    }
}
