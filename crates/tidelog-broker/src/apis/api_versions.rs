//! ApiVersions: generated from the handler table, so it cannot drift from what runs.

use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::versions::{self, encode_api_versions_answer};
use tidelog_protocol::ProtocolError;

use super::{Request, SUPPORTED};
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The handler table in the protocol crate's terms.
fn table() -> Vec<(ApiKey, versions::VersionRange)> {
    SUPPORTED
        .iter()
        .map(|(key, range)| (*key, versions::VersionRange::new(range.min, range.max)))
        .collect()
}

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let _request: ApiVersionsRequest = req.decode()?;
    // Features and their epoch stay at their defaults so the encoder leaves the tagged
    // fields out: librdkafka 2.0.2 misparses a v3 response that carries them.
    encode_api_versions_answer(req.header.correlation_id, req.version(), &table()).map(Reply::Bytes)
}

/// A client asked with a newer ApiVersions than we speak: Kafka's answer is
/// UNSUPPORTED_VERSION with the ranges, in a v0 body the client can always read.
pub(crate) fn unsupported_version(correlation_id: i32) -> Reply {
    match encode_api_versions_answer(correlation_id, i16::MAX, &table()) {
        Ok(bytes) => Reply::Bytes(bytes),
        Err(_) => Reply::Close,
    }
}
