//! ApiVersions: generated from the handler table, so it cannot drift from what runs.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::header::encode_response;
use tidelog_protocol::ProtocolError;

use super::{Request, SUPPORTED};
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(key, range)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
        .collect()
}

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let _request: ApiVersionsRequest = req.decode()?;
    // Features and their epoch stay at their defaults so the encoder leaves the tagged
    // fields out: librdkafka 2.0.2 misparses a v3 response that carries them.
    let response = ApiVersionsResponse::default().with_api_keys(api_keys());
    req.respond(&response)
}

/// A client asked with a newer ApiVersions than we speak: Kafka's answer is
/// UNSUPPORTED_VERSION with the ranges, in a v0 body the client can always read.
pub(crate) fn unsupported_version(correlation_id: i32) -> Reply {
    let response = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys());
    match encode_response(correlation_id, ApiKey::ApiVersions, 0, &response) {
        Ok(bytes) => Reply::Bytes(bytes),
        Err(_) => Reply::Close,
    }
}
