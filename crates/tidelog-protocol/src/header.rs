//! Server side of the request/response envelope: request header in, response header out.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::error::ProtocolError;

/// The request header, decoded. The frame it came from is left positioned at the body.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedHeader {
    /// Which api.
    pub api_key: ApiKey,
    /// The version of the body that follows (not yet checked against what the server supports).
    pub api_version: i16,
    /// Echoed in the response.
    pub correlation_id: i32,
    /// The client's self-chosen name.
    pub client_id: Option<StrBytes>,
    /// The request header version (1, or 2 for flexible versions) this header was read at.
    pub header_version: i16,
}

/// Reads the fixed part (api key, api version, correlation id) of a request header from
/// the first 8 bytes of a frame, without consuming anything.
///
/// `UnknownApiKey` carries whatever of the fixed part the frame held.
fn peek_fixed(frame: &[u8]) -> Result<(ApiKey, i16, i32), ProtocolError> {
    let mut fixed = frame;
    if fixed.len() < 2 {
        return Err(ProtocolError::TruncatedHeader { len: frame.len() });
    }
    let raw_key = fixed.get_i16();
    let api_version = (fixed.len() >= 2).then(|| fixed.get_i16());
    let correlation_id = (fixed.len() >= 4).then(|| fixed.get_i32());
    let api_key = ApiKey::try_from(raw_key).map_err(|()| ProtocolError::UnknownApiKey {
        api_key: raw_key,
        api_version,
        correlation_id,
    })?;
    match (api_version, correlation_id) {
        (Some(v), Some(c)) => Ok((api_key, v, c)),
        _ => Err(ProtocolError::TruncatedHeader { len: frame.len() }),
    }
}

/// Decodes the request header at the front of `frame` and advances `frame` to the body.
///
/// The api key is checked before anything past the fixed 8 bytes is read; an unknown key
/// yields [`ProtocolError::UnknownApiKey`] with the correlation id when the frame held it.
/// The api version is NOT checked here: the server's own table decides what it supports,
/// and must answer an unsupported ApiVersions request rather than drop it. The header
/// version follows from (api key, api version) as Kafka defines it, also for versions newer
/// than this codec knows (the flexible-header cut-over is monotonic).
pub fn decode_request_header(frame: &mut Bytes) -> Result<DecodedHeader, ProtocolError> {
    let (api_key, api_version, correlation_id) = peek_fixed(frame)?;
    let header_version = api_key.request_header_version(api_version);
    let header = RequestHeader::decode(frame, header_version).map_err(|e| {
        ProtocolError::MalformedHeader {
            api_key,
            correlation_id,
            source: e.into(),
        }
    })?;
    Ok(DecodedHeader {
        api_key,
        api_version,
        correlation_id,
        client_id: header.client_id,
        header_version,
    })
}

/// Decodes a request (or response) body at `version` and requires that it uses up `buf`.
///
/// Trailing bytes are an error: Kafka's own server parses a request into exactly the
/// struct of the announced version, and a client encodes exactly that, so bytes left over
/// mean a peer that lies about its version or crafts input; answering such a request
/// as if it were well-formed would hide the problem.
pub fn decode_request_body<T: Decodable>(
    buf: &mut Bytes,
    version: i16,
) -> Result<T, ProtocolError> {
    decode_exact(buf, version, std::any::type_name::<T>())
}

pub(crate) fn decode_exact<T: Decodable>(
    buf: &mut Bytes,
    version: i16,
    what: &'static str,
) -> Result<T, ProtocolError> {
    let what = short_type_name(what);
    let body = T::decode(buf, version).map_err(|e| ProtocolError::Decode {
        what,
        version,
        source: e.into(),
    })?;
    if buf.has_remaining() {
        return Err(ProtocolError::TrailingBytes {
            what,
            version,
            remaining: buf.remaining(),
        });
    }
    Ok(body)
}

/// `kafka_protocol::messages::fetch_request::FetchRequest` -> `FetchRequest`.
pub(crate) fn short_type_name(full: &'static str) -> &'static str {
    full.rsplit("::").next().unwrap_or(full)
}

/// The response header version for `api_key` at `api_version`: 1 for flexible versions,
/// 0 otherwise, and always 0 for ApiVersions (a client must be able to read the answer
/// before it knows which versions the server speaks).
pub fn response_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(api_version)
    }
}

/// Encodes size prefix + response header + `body` at `api_version`, ready for the socket.
pub fn encode_response<T: Encodable>(
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    body: &T,
) -> Result<Bytes, ProtocolError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = response_header_version(api_key, api_version);
    encode_framed(
        &header,
        header_version,
        "ResponseHeader",
        body,
        api_version,
        short_type_name(std::any::type_name::<T>()),
    )
}

/// Size prefix + `header` at `header_version` + `body` at `body_version`, in one buffer
/// allocated at its exact final size.
pub(crate) fn encode_framed<H: Encodable, T: Encodable>(
    header: &H,
    header_version: i16,
    header_what: &'static str,
    body: &T,
    body_version: i16,
    body_what: &'static str,
) -> Result<Bytes, ProtocolError> {
    let header_size = header
        .compute_size(header_version)
        .map_err(|e| encode_error(header_what, header_version, e.into()))?;
    let body_size = body
        .compute_size(body_version)
        .map_err(|e| encode_error(body_what, body_version, e.into()))?;
    let size = header_size
        .checked_add(body_size)
        .ok_or(ProtocolError::TooLarge { size: u64::MAX })?;
    let prefix = i32::try_from(size).map_err(|_| ProtocolError::TooLarge { size: size as u64 })?;
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_i32(prefix);
    header
        .encode(&mut out, header_version)
        .map_err(|e| encode_error(header_what, header_version, e.into()))?;
    body.encode(&mut out, body_version)
        .map_err(|e| encode_error(body_what, body_version, e.into()))?;
    if out.len() != 4 + size {
        // compute_size and encode disagree: the size prefix would lie to the peer.
        return Err(ProtocolError::Encode {
            what: body_what,
            version: body_version,
            source: format!("encoded {} bytes, computed {}", out.len() - 4, size).into(),
        });
    }
    Ok(out.freeze())
}

fn encode_error(
    what: &'static str,
    version: i16,
    source: crate::error::CodecError,
) -> ProtocolError {
    ProtocolError::Encode {
        what,
        version,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: &[u8]) -> Bytes {
        Bytes::copy_from_slice(bytes)
    }

    #[test]
    fn unknown_api_key_still_yields_the_correlation_id() {
        // api key 999, version 3, correlation id 0x01020304, then anything
        let mut f = frame(&[0x03, 0xe7, 0, 3, 1, 2, 3, 4, 0xff, 0xff]);
        let err = decode_request_header(&mut f).unwrap_err();
        assert!(matches!(
            err,
            ProtocolError::UnknownApiKey {
                api_key: 999,
                api_version: Some(3),
                correlation_id: Some(0x0102_0304)
            }
        ));
        assert_eq!(err.correlation_id(), Some(0x0102_0304));
        // too short to hold a correlation id
        let mut f = frame(&[0x03, 0xe7, 0, 3, 1]);
        assert!(matches!(
            decode_request_header(&mut f),
            Err(ProtocolError::UnknownApiKey {
                api_key: 999,
                correlation_id: None,
                ..
            })
        ));
    }

    #[test]
    fn truncated_headers_are_errors() {
        for bytes in [&[][..], &[0], &[0, 3, 0, 1], &[0, 3, 0, 1, 0, 0, 0]] {
            let mut f = frame(bytes);
            assert!(
                matches!(
                    decode_request_header(&mut f),
                    Err(ProtocolError::TruncatedHeader { .. })
                ),
                "{bytes:?}"
            );
        }
        // fixed part complete, client id length says 5 but 1 byte follows
        let mut f = frame(&[0, 3, 0, 1, 0, 0, 0, 9, 0, 5, b'a']);
        let err = decode_request_header(&mut f).unwrap_err();
        assert!(matches!(
            err,
            ProtocolError::MalformedHeader {
                api_key: ApiKey::Metadata,
                correlation_id: 9,
                ..
            }
        ));
    }

    #[test]
    fn too_new_api_versions_request_header_is_still_read() {
        // ApiVersions v9 (newer than any known): flexible header v2, so a tagged-field
        // byte follows the client id; the body after it is left for the caller.
        let mut f = frame(&[0, 18, 0, 9, 0, 0, 0, 5, 0, 2, b'k', b'c', 0, 0xaa]);
        let h = decode_request_header(&mut f).unwrap();
        assert_eq!(h.api_key, ApiKey::ApiVersions);
        assert_eq!(h.api_version, 9);
        assert_eq!(h.correlation_id, 5);
        assert_eq!(h.header_version, 2);
        assert_eq!(h.client_id.as_deref(), Some("kc"));
        assert_eq!(&f[..], &[0xaa]);
    }

    #[test]
    fn response_header_versions() {
        assert_eq!(response_header_version(ApiKey::ApiVersions, 3), 0);
        assert_eq!(response_header_version(ApiKey::ApiVersions, 4), 0);
        assert_eq!(response_header_version(ApiKey::Metadata, 8), 0);
        assert_eq!(response_header_version(ApiKey::Metadata, 9), 1);
        assert_eq!(response_header_version(ApiKey::Fetch, 12), 1);
        let r = encode_response(
            7,
            ApiKey::Metadata,
            9,
            &kafka_protocol::messages::MetadataResponse::default(),
        )
        .unwrap();
        // size, correlation id, empty tagged fields of header v1
        assert_eq!(&r[4..9], &[0, 0, 0, 7, 0]);
    }
}
