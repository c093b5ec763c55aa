//! The API version table as data, and the ApiVersions answers built from it.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use crate::error::ProtocolError;
use crate::header::encode_response;

/// The versions of one api a server implements, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// Oldest supported version.
    pub min: i16,
    /// Newest supported version.
    pub max: i16,
}

impl VersionRange {
    /// `min..=max`.
    pub const fn new(min: i16, max: i16) -> Self {
        Self { min, max }
    }

    /// Whether `version` is in the range.
    pub fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// The newest ApiVersions version this crate can encode an answer for.
pub const API_VERSIONS_MAX: i16 = 4;

fn api_keys(table: &[(ApiKey, VersionRange)]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|(key, range)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
        .collect()
}

/// A successful ApiVersions response listing `table`.
///
/// Feature fields (`supported_features`, `finalized_features`, their epoch,
/// `zk_migration_ready`) keep their defaults, and kafka-protocol omits tagged fields that
/// hold their default, so a v3/v4 encoding carries no tagged fields at all: librdkafka
/// 2.0.2 (Debian's kcat) was seen to misparse an ApiVersions v3 response that has them.
/// A re-check with well-formed feature fields did not reproduce that, and the
/// `transaction.version` feature stays unfinalized for other reasons
/// (docs/compatibility.md, "Transactions and transaction version 2").
pub fn api_versions_response(
    table: &[(ApiKey, VersionRange)],
    throttle_time_ms: i32,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(api_keys(table))
        .with_throttle_time_ms(throttle_time_ms)
}

/// The answer to an ApiVersions request of a version newer than the server speaks:
/// UNSUPPORTED_VERSION plus the ranges, to be encoded as **v0** (which every client can
/// read) so the client can retry with a version from the list.
pub fn unsupported_api_versions_response(table: &[(ApiKey, VersionRange)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys(table))
}

/// The complete framed answer to an ApiVersions request at `request_version`: the normal
/// response at that version when `table` supports it, else the v0 UNSUPPORTED_VERSION
/// fallback. The response header is v0 either way.
pub fn encode_api_versions_answer(
    correlation_id: i32,
    request_version: i16,
    table: &[(ApiKey, VersionRange)],
) -> Result<Bytes, ProtocolError> {
    let supported = table
        .iter()
        .find(|(key, _)| *key == ApiKey::ApiVersions)
        .is_some_and(|(_, range)| range.contains(request_version))
        && (0..=API_VERSIONS_MAX).contains(&request_version);
    if supported {
        let body = api_versions_response(table, 0);
        encode_response(correlation_id, ApiKey::ApiVersions, request_version, &body)
    } else {
        let body = unsupported_api_versions_response(table);
        encode_response(correlation_id, ApiKey::ApiVersions, 0, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::decode_response;

    const TABLE: &[(ApiKey, VersionRange)] = &[
        (ApiKey::Produce, VersionRange::new(3, 11)),
        (ApiKey::ApiVersions, VersionRange::new(0, 4)),
    ];

    #[test]
    fn v3_encoding_with_only_api_keys_has_no_tagged_fields() {
        let table = [(ApiKey::ApiVersions, VersionRange::new(0, 4))];
        let bytes = encode_api_versions_answer(7, 3, &table).unwrap();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 19,          // size
            0, 0, 0, 7,           // correlation id (header v0: no tagged fields)
            0, 0,                 // error code
            2,                    // compact array of 1
            0, 18, 0, 0, 0, 4, 0, // ApiVersions 0..=4, no tagged fields
            0, 0, 0, 0,           // throttle
            0,                    // no tagged fields: no features, no zk_migration_ready
        ];
        assert_eq!(&bytes[..], expected);
        // v4 has the same shape
        let v4 = encode_api_versions_answer(7, 4, &table).unwrap();
        assert_eq!(&v4[..], expected);
    }

    #[test]
    fn every_supported_version_round_trips() {
        for version in 0..=4 {
            let bytes = encode_api_versions_answer(1, version, TABLE).unwrap();
            let (corr, resp): (i32, ApiVersionsResponse) =
                decode_response(bytes.slice(4..), ApiKey::ApiVersions, version).unwrap();
            assert_eq!(corr, 1);
            assert_eq!(resp.error_code, 0);
            let keys: Vec<_> = resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version))
                .collect();
            assert_eq!(keys, vec![(0, 3, 11), (18, 0, 4)]);
        }
    }

    #[test]
    fn too_new_request_gets_a_v0_unsupported_version_body() {
        let bytes = encode_api_versions_answer(5, 9, TABLE).unwrap();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 22,
            0, 0, 0, 5,
            0, 35,                 // UNSUPPORTED_VERSION
            0, 0, 0, 2,            // array of 2 (v0: int32 count)
            0, 0, 0, 3, 0, 11,
            0, 18, 0, 0, 0, 4,
        ];
        assert_eq!(&bytes[..], expected);
        // A client that asked at v9 still reads it.
        let (_, resp): (i32, ApiVersionsResponse) =
            decode_response(bytes.slice(4..), ApiKey::ApiVersions, 9).unwrap();
        assert_eq!(resp.error_code, 35);
        assert_eq!(resp.api_keys.len(), 2);
    }

    #[test]
    fn a_table_without_the_requested_version_falls_back_too() {
        let table = [(ApiKey::ApiVersions, VersionRange::new(0, 2))];
        let bytes = encode_api_versions_answer(5, 3, &table).unwrap();
        assert_eq!(&bytes[8..10], &[0, 35]);
    }
}
