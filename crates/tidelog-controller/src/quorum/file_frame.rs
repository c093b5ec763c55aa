//! CRC-framed records of the quorum's files (`raft.log`, `raft.state`,
//! `raft.snapshot`).
//!
//! Byte layout of one frame (integers big-endian):
//! ```text
//! 0  u32  body_len   1 ..= limit given by the reader
//! 4  u32  crc        CRC-32C of the body
//! 8  u8   kind       what the payload is (see the file's writer)
//! 9  ..   payload    body_len - 1 bytes
//! ```
//! The length is outside the CRC: a damaged length fails the bound or the CRC check,
//! which is how a torn tail is recognised.

use std::io::Read;

use crate::durable::read_full;

const HEADER_BYTES: usize = 8;

pub(crate) fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let body_len = 1 + payload.len();
    let mut out = Vec::with_capacity(HEADER_BYTES + body_len);
    // Callers bound payloads far below 4 GiB; saturate rather than wrap if one did not.
    out.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[HEADER_BYTES..]);
    out[4..8].copy_from_slice(&crc.to_be_bytes());
    out
}

/// What reading the next frame found.
#[derive(Debug)]
pub(crate) enum FileFrame {
    Frame {
        kind: u8,
        payload: Vec<u8>,
        /// Bytes the frame occupies, header included.
        size: u64,
    },
    /// Clean end of input.
    End,
    /// An incomplete, oversized or checksum-failing frame.
    Torn(String),
}

/// Reads one frame whose body is at most `limit` bytes (checked before allocating).
pub(crate) fn read(input: &mut impl Read, limit: usize) -> std::io::Result<FileFrame> {
    let mut header = [0u8; HEADER_BYTES];
    match read_full(input, &mut header)? {
        0 => return Ok(FileFrame::End),
        HEADER_BYTES => {}
        n => return Ok(FileFrame::Torn(format!("{n}-byte frame header"))),
    }
    let body_len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if body_len == 0 || body_len > limit {
        return Ok(FileFrame::Torn(format!(
            "impossible frame length {body_len}"
        )));
    }
    let mut body = vec![0u8; body_len];
    let got = read_full(input, &mut body)?;
    if got < body_len {
        return Ok(FileFrame::Torn(format!(
            "frame of {body_len} bytes cut after {got}"
        )));
    }
    let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    if crc32c::crc32c(&body) != crc {
        return Ok(FileFrame::Torn("checksum mismatch".to_owned()));
    }
    let kind = body[0];
    body.remove(0);
    Ok(FileFrame::Frame {
        kind,
        payload: body,
        size: (HEADER_BYTES + body_len) as u64,
    })
}

/// Decodes a whole buffer that must hold exactly one intact frame (files written
/// atomically, which can never be torn).
pub(crate) fn decode_single(bytes: &[u8], limit: usize) -> Result<(u8, Vec<u8>), String> {
    let mut input = bytes;
    match read(&mut input, limit).map_err(|e| e.to_string())? {
        FileFrame::Frame { kind, payload, .. } if input.is_empty() => Ok((kind, payload)),
        FileFrame::Frame { .. } => Err("trailing bytes after the frame".to_owned()),
        FileFrame::End => Err("empty file".to_owned()),
        FileFrame::Torn(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_damage_is_torn() {
        let bytes = encode(7, b"hello quorum");
        let mut input = &bytes[..];
        match read(&mut input, 1024).unwrap() {
            FileFrame::Frame {
                kind,
                payload,
                size,
            } => {
                assert_eq!(kind, 7);
                assert_eq!(payload, b"hello quorum");
                assert_eq!(size, bytes.len() as u64);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(read(&mut input, 1024).unwrap(), FileFrame::End));
        for cut in 1..bytes.len() {
            let mut input = &bytes[..cut];
            assert!(matches!(
                read(&mut input, 1024).unwrap(),
                FileFrame::Torn(_)
            ));
        }
        for pos in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[pos] ^= 0x01;
            let mut input = &damaged[..];
            assert!(
                matches!(read(&mut input, 1024).unwrap(), FileFrame::Torn(_)),
                "{pos}"
            );
        }
        assert_eq!(
            decode_single(&bytes, 1024).unwrap(),
            (7, b"hello quorum".to_vec())
        );
        assert!(decode_single(&bytes, 4).is_err());
    }
}
