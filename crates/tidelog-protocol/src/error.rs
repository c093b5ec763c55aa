//! The one error type of this crate.

use kafka_protocol::messages::ApiKey;

/// A boxed codec error. `kafka-protocol` reports failures as `anyhow::Error`; boxing keeps
/// `anyhow` out of this library's public API while preserving the message chain.
pub type CodecError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong turning bytes into messages or messages into bytes.
///
/// Variants that a server must still answer carry the correlation id when it could be read.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The frame ended before the fixed part of the request header (api key, api version,
    /// correlation id: 8 bytes).
    #[error("request header truncated: {len} bytes")]
    TruncatedHeader {
        /// Bytes the frame held.
        len: usize,
    },
    /// The api key is not one this codec knows. Nothing past the fixed header part was read.
    #[error("unknown api key {api_key}")]
    UnknownApiKey {
        /// The raw api key from the wire.
        api_key: i16,
        /// The api version from the wire, if the frame held it.
        api_version: Option<i16>,
        /// The correlation id, if the frame held it, so the server can still answer.
        correlation_id: Option<i32>,
    },
    /// The rest of the request header (client id, tagged fields) did not decode.
    #[error("malformed {api_key:?} request header (correlation id {correlation_id})")]
    MalformedHeader {
        /// The request's api key.
        api_key: ApiKey,
        /// The request's correlation id.
        correlation_id: i32,
        /// What the codec reported.
        #[source]
        source: CodecError,
    },
    /// A request or response body did not decode.
    #[error("cannot decode {what} v{version}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// The version it was decoded at.
        version: i16,
        /// What the codec reported.
        #[source]
        source: CodecError,
    },
    /// A body decoded but left bytes behind. A well-behaved peer encodes exactly the
    /// version it announced, so leftover bytes mean a version mix-up or a hostile peer.
    #[error("{what} v{version} left {remaining} trailing bytes")]
    TrailingBytes {
        /// What was being decoded.
        what: &'static str,
        /// The version it was decoded at.
        version: i16,
        /// Bytes left over.
        remaining: usize,
    },
    /// A message did not encode (e.g. a field not representable at that version).
    #[error("cannot encode {what} v{version}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The version it was encoded at.
        version: i16,
        /// What the codec reported.
        #[source]
        source: CodecError,
    },
    /// An api version outside what this crate can encode or decode for that api.
    #[error("{api_key:?} version {version} is not supported")]
    UnsupportedVersion {
        /// The api.
        api_key: ApiKey,
        /// The version asked for.
        version: i16,
    },
    /// A message larger than a Kafka frame can describe (i32 size prefix).
    #[error("message of {size} bytes does not fit a Kafka frame")]
    TooLarge {
        /// The size that did not fit.
        size: u64,
    },
    /// The response carried a correlation id other than the one expected.
    #[error("response correlation id {actual}, expected {expected}")]
    CorrelationMismatch {
        /// The id sent with the request.
        expected: i32,
        /// The id in the response.
        actual: i32,
    },
}
