//! Client side of the envelope: request header out, response header in.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::error::ProtocolError;
use crate::header::{decode_exact, encode_framed, response_header_version, short_type_name};

/// Encodes size prefix + request header (version 1, or 2 for flexible api versions) +
/// `body` at `api_version`, ready for the socket.
pub fn encode_request<T: Encodable>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    body: &T,
) -> Result<Bytes, ProtocolError> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(api_version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|s| StrBytes::from_string(s.to_owned())));
    let header_version = api_key.request_header_version(api_version);
    encode_framed(
        &header,
        header_version,
        "RequestHeader",
        body,
        api_version,
        short_type_name(std::any::type_name::<T>()),
    )
}

/// Decodes a response frame (body of [`crate::frame::read_frame`], without the size
/// prefix) to its correlation id and body.
///
/// The response header version follows from the request's api key and version
/// (ApiVersions: always 0). One Kafka rule is applied here: a server that does not support
/// the ApiVersions version asked for answers UNSUPPORTED_VERSION with a **v0** body, so
/// an ApiVersions body starting with that error code is decoded at v0 and the caller sees
/// the error code and the server's ranges, from which it picks a version to retry with.
pub fn decode_response<T: Decodable>(
    mut frame: Bytes,
    api_key: ApiKey,
    api_version: i16,
) -> Result<(i32, T), ProtocolError> {
    let header_version = response_header_version(api_key, api_version);
    let header =
        ResponseHeader::decode(&mut frame, header_version).map_err(|e| ProtocolError::Decode {
            what: "ResponseHeader",
            version: header_version,
            source: e.into(),
        })?;
    let unsupported = ResponseError::UnsupportedVersion.code();
    let body_version = if api_key == ApiKey::ApiVersions
        && frame.len() >= 2
        && i16::from_be_bytes([frame[0], frame[1]]) == unsupported
    {
        0
    } else {
        api_version
    };
    let body = decode_exact(&mut frame, body_version, std::any::type_name::<T>())?;
    Ok((header.correlation_id, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{decode_request_body, decode_request_header, encode_response};
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    };

    #[test]
    fn request_round_trips_through_server_side_decoding() {
        for version in 0..=13 {
            let req = MetadataRequest::default().with_topics(Some(vec![]));
            let bytes = encode_request(ApiKey::Metadata, version, 77, Some("cli"), &req).unwrap();
            let size = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            assert_eq!(size as usize, bytes.len() - 4);
            let mut frame = bytes.slice(4..);
            let header = decode_request_header(&mut frame).unwrap();
            assert_eq!(header.api_key, ApiKey::Metadata);
            assert_eq!(header.api_version, version);
            assert_eq!(header.correlation_id, 77);
            assert_eq!(header.client_id.as_deref(), Some("cli"));
            assert_eq!(header.header_version, if version >= 9 { 2 } else { 1 });
            let back: MetadataRequest = decode_request_body(&mut frame, version).unwrap();
            assert_eq!(back, req);
        }
    }

    #[test]
    fn response_round_trips_through_client_side_decoding() {
        for version in 0..=13 {
            let resp =
                MetadataResponse::default().with_throttle_time_ms(if version >= 3 { 5 } else { 0 });
            let bytes = encode_response(9, ApiKey::Metadata, version, &resp).unwrap();
            let (corr, back): (i32, MetadataResponse) =
                decode_response(bytes.slice(4..), ApiKey::Metadata, version).unwrap();
            assert_eq!(corr, 9);
            assert_eq!(back, resp);
        }
    }

    #[test]
    fn unsupported_api_versions_answer_is_read_at_v0() {
        let v0 = ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(18)
                .with_min_version(0)
                .with_max_version(3)]);
        // The server encodes v0 for a v4 request; the client asked at v4.
        let bytes = encode_response(1, ApiKey::ApiVersions, 0, &v0).unwrap();
        let (corr, back): (i32, ApiVersionsResponse) =
            decode_response(bytes.slice(4..), ApiKey::ApiVersions, 4).unwrap();
        assert_eq!(corr, 1);
        assert_eq!(back, v0);
    }

    #[test]
    fn api_versions_request_header_is_flexible_at_v3() {
        let req = ApiVersionsRequest::default();
        let bytes = encode_request(ApiKey::ApiVersions, 3, 1, None, &req).unwrap();
        // size, key 18, version 3, corr 1, null client id, empty tagged fields, body.
        assert_eq!(&bytes[4..15], &[0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0][..]);
    }

    #[test]
    fn trailing_bytes_in_a_response_are_rejected() {
        let resp = MetadataResponse::default();
        let bytes = encode_response(3, ApiKey::Metadata, 1, &resp).unwrap();
        let mut with_extra = bytes.slice(4..).to_vec();
        with_extra.push(0);
        let err = decode_response::<MetadataResponse>(with_extra.into(), ApiKey::Metadata, 1);
        assert!(matches!(
            err,
            Err(ProtocolError::TrailingBytes { remaining: 1, .. })
        ));
    }
}
