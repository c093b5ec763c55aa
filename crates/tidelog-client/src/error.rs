//! The one error type of the client.

use kafka_protocol::ResponseError;

/// Everything that can go wrong talking to a tidelog (or any Kafka) cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No TCP connection could be opened to this address.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// Why it failed (refused, timed out, unresolvable).
        reason: String,
    },
    /// None of the bootstrap addresses answered.
    #[error("cannot connect to any bootstrap server ({tried}): {last}")]
    Bootstrap {
        /// The addresses tried, comma separated.
        tried: String,
        /// The error of the last attempt.
        last: Box<ClientError>,
    },
    /// A request did not get its response in time.
    #[error("{api} request to {addr} timed out after {timeout_ms} ms")]
    Timeout {
        /// The broker address.
        addr: String,
        /// The API name.
        api: String,
        /// The timeout that expired.
        timeout_ms: u64,
    },
    /// The connection broke while sending or receiving.
    #[error("connection to {addr} failed: {source}")]
    Io {
        /// The broker address.
        addr: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The broker closed the connection.
    #[error("connection to {addr} was closed by the broker")]
    Closed {
        /// The broker address.
        addr: String,
    },
    /// A message could not be encoded or a response could not be decoded.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The broker supports no version of an API that this client can speak.
    #[error("broker {addr} does not support {api} (versions {ours} wanted)")]
    UnsupportedApi {
        /// The broker address.
        addr: String,
        /// The API name.
        api: String,
        /// The range this client speaks.
        ours: String,
    },
    /// The broker answered with an error code.
    #[error("{context}: {}{}", kafka_error_name(*error), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// What was being done (e.g. "create topic orders").
        context: String,
        /// The Kafka error.
        error: ResponseError,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// The topic does not exist (and was not auto-created).
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// The topic exists but has no such partition.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The partition has no live leader, or the leader is not among the known brokers.
    #[error("partition {topic}-{partition} has no available leader")]
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A caller-supplied argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `send` found no room for a record in the producer's buffer (`buffer.memory`) and
    /// none was freed by acknowledgements within `max.block.ms`: the broker is down or
    /// slower than the application. The record was not queued; those buffered stay.
    #[error("producer buffer full: no room for a {record}-byte record in buffer.memory={buffer_memory} bytes ({used} in use, unacknowledged or awaiting flush) after waiting {waited_ms} ms (max.block.ms={max_block_ms}){}", last.as_ref().map(|e| format!("; last delivery attempt: {e}")).unwrap_or_default())]
    BufferFull {
        /// The configured `buffer.memory`.
        buffer_memory: usize,
        /// Bytes in use when `send` gave up.
        used: usize,
        /// The approximate size of the record that did not fit.
        record: usize,
        /// The configured `max.block.ms`.
        max_block_ms: u64,
        /// How long `send` waited.
        waited_ms: u64,
        /// Why the buffered records could not be delivered meanwhile, when known.
        last: Option<Box<ClientError>>,
    },
    /// The broker refused an idempotent producer's batch for its sequence or epoch
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH,
    /// PRODUCER_FENCED). Retrying could reorder records, so every buffered record failed;
    /// the producer gets a new producer id before it sends again.
    #[error("idempotent producer {producer_id} (epoch {epoch}): {topic}-{partition} refused its batch with {}{}; the buffered records were dropped and the producer starts over with a new producer id", kafka_error_name(*error), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    ProducerSequence {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The producer id the batch carried.
        producer_id: i64,
        /// Its epoch.
        epoch: i16,
        /// The Kafka error.
        error: ResponseError,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// A transactional producer's call failed or is not allowed now. `kind` says what the
    /// producer can still do: nothing ([`TransactionErrorKind::Fatal`]: fenced by a newer
    /// instance with the same `transactional.id`, or not authorized), only abort the
    /// transaction ([`TransactionErrorKind::Abortable`]), or the call came in the wrong
    /// state ([`TransactionErrorKind::InvalidState`]; nothing changed).
    #[error("transactional producer {transactional_id}: {reason}{}", error.map(|e| format!(" ({})", kafka_error_name(e))).unwrap_or_default())]
    Transaction {
        /// The `transactional.id`.
        transactional_id: String,
        /// What the producer can still do.
        kind: TransactionErrorKind,
        /// The Kafka error behind it, when the broker sent one.
        error: Option<ResponseError>,
        /// What happened, and what to do.
        reason: String,
    },
    /// A request kept failing with retriable errors until the API timeout
    /// ([`crate::ClientConfig::api_timeout`]) ran out; `last` is the last failure.
    #[error("{last} (still failing after retrying for {} s)", .after.as_secs())]
    GaveUp {
        /// How long it was retried.
        after: std::time::Duration,
        /// The last attempt's error.
        last: Box<ClientError>,
    },
}

/// What a [`ClientError::Transaction`] leaves the producer able to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionErrorKind {
    /// Nothing: another producer with the same `transactional.id` fenced this one
    /// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) or the id is not authorized
    /// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Every further call fails; drop it.
    Fatal,
    /// The open transaction can only be aborted (a send in it failed).
    Abortable,
    /// The call is not allowed in the producer's current state; nothing changed.
    InvalidState,
}

impl ClientError {
    /// The Kafka error code behind this error, when the broker sent one.
    pub fn response_error(&self) -> Option<ResponseError> {
        match self {
            ClientError::Broker { error, .. } | ClientError::ProducerSequence { error, .. } => {
                Some(*error)
            }
            ClientError::GaveUp { last, .. } => last.response_error(),
            ClientError::Transaction { error, .. } => *error,
            _ => None,
        }
    }

    /// Whether the same request may succeed if sent again, to the same or another
    /// broker, a little later: no broker or connection reachable yet, the controller
    /// moving or being elected, a leader being elected, a request that timed out.
    /// Kafka's AdminClient retries the same ones.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Bootstrap { .. }
            | ClientError::Timeout { .. }
            | ClientError::Io { .. }
            | ClientError::Closed { .. }
            | ClientError::NoLeader { .. } => true,
            ClientError::Broker { error, .. } => matches!(
                error,
                ResponseError::NotController
                    | ResponseError::RequestTimedOut
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::NotLeaderOrFollower
                    | ResponseError::CoordinatorNotAvailable
                    | ResponseError::CoordinatorLoadInProgress
                    | ResponseError::NotCoordinator
                    | ResponseError::NetworkException
            ),
            _ => false,
        }
    }

    /// Builds a [`ClientError::Broker`] from a non-zero error code; `Ok` for code 0.
    pub(crate) fn check(
        code: i16,
        message: Option<&str>,
        context: impl FnOnce() -> String,
    ) -> Result<(), ClientError> {
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(error) => Err(ClientError::Broker {
                context: context(),
                error,
                message: message.filter(|m| !m.is_empty()).map(str::to_owned),
            }),
        }
    }
}

/// The error's name as Kafka documents it (`UNKNOWN_TOPIC_OR_PARTITION`), which operators
/// search for; the codec's `Display` gives the Rust variant name.
pub fn kafka_error_name(error: ResponseError) -> String {
    let camel = error.to_string();
    if let ResponseError::Unknown(code) = error {
        return format!("UNKNOWN_ERROR_CODE_{code}");
    }
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Result alias for the client.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_are_screaming_snake_case() {
        assert_eq!(
            kafka_error_name(ResponseError::UnknownTopicOrPartition),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
        assert_eq!(
            kafka_error_name(ResponseError::InvalidConfig),
            "INVALID_CONFIG"
        );
        assert_eq!(
            kafka_error_name(ResponseError::Unknown(999)),
            "UNKNOWN_ERROR_CODE_999"
        );
    }

    #[test]
    fn broker_errors_show_context_name_and_message() {
        let e = ClientError::check(40, Some("Unknown topic config name: x"), || {
            "alter configs of topic t".into()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "alter configs of topic t: INVALID_CONFIG: Unknown topic config name: x"
        );
        assert!(ClientError::check(0, Some("ignored"), String::new).is_ok());
    }
}
