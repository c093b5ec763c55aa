//! tidelog-protocol: Kafka wire framing, request/response envelopes, the API version
//! table helpers, error codes, and a zero-copy Fetch response encoder.
//!
//! Message bodies are `kafka-protocol`'s structs (carried with a patch that bounds every
//! wire-declared allocation, see `vendor/kafka-protocol/PATCHES.md`); this crate adds what
//! surrounds them and the checks that keep hostile input from reaching an unbounded
//! allocation or a panic.
//!
//! - [`frame`]: size-prefixed frames, bounded before anything is buffered
//!   ([`read_frame`], [`read_request_frame`] which vets api key/version first).
//! - [`header`]: server side — request header in ([`decode_request_header`]), body
//!   ([`decode_request_body`], trailing bytes refused), response out ([`encode_response`]).
//! - [`client`]: client side — `encode_request`, `decode_response`.
//! - [`versions`]: a supported-version table and the ApiVersions answers built from it.
//! - [`errors`]: Kafka error codes.
//! - [`fetch_encode`]: Fetch responses as chunks with placeholders for file-backed records.

pub mod client;
pub mod error;
pub mod errors;
pub mod fetch_encode;
pub mod frame;
pub mod header;
pub mod versions;

pub use error::ProtocolError;
pub use fetch_encode::{
    encode_fetch_response, Chunk, FetchPartitionParts, FetchResponseParts, FetchTopicParts,
    RecordsPayload,
};
pub use frame::{
    read_frame, read_request_frame, FrameError, RequestFrame, DEFAULT_MAX_REQUEST_BYTES,
};
pub use header::{decode_request_body, decode_request_header, encode_response, DecodedHeader};
