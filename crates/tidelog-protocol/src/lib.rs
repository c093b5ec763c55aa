//! tidelog-protocol: Kafka wire framing, request/response envelopes, the API version
//! table helpers, error codes, and a zero-copy Fetch response encoder.
//!
//! Message bodies are `kafka-protocol`'s structs; this crate adds what surrounds them
//! and the checks that keep hostile input from reaching an unbounded allocation.

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
