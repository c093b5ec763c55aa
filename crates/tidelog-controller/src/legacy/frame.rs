//! One frame of the metadata log: an atomically appended batch of records.
//!
//! Byte layout (all integers big-endian):
//! ```text
//! 0   u32  frame_len      bytes after this field (>= 13, <= MAX_FRAME_BYTES)
//! 4   u32  crc            CRC-32C of bytes 8 .. 4 + frame_len
//! 8   u64  base_offset    offset of the first record; record i has base_offset + i
//! 16  u8   encoding       1 = payload is a JSON array of MetadataRecord (see record.rs)
//! 17  ..   payload        frame_len - 13 bytes, a non-empty array
//! ```
//! The whole batch is one frame so a crash never leaves half a request applied (a topic
//! without its partitions). The length is outside the CRC; a damaged length makes the
//! CRC check (or the bound check) fail, which is how a torn tail is recognised.

use std::io::Read;

use crate::durable::read_full;
#[cfg(test)]
use crate::error::ControllerError;
use crate::record::MetadataRecord;

/// Upper bound of one frame: large enough for a topic with 100 000 partitions.
pub(crate) const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
const LEN_BYTES: usize = 4;
/// crc + base_offset + encoding
const FIXED_BYTES: usize = 4 + 8 + 1;
const ENCODING_JSON: u8 = 1;

#[cfg(test)]
pub(crate) fn encode(
    base_offset: u64,
    records: &[MetadataRecord],
) -> Result<Vec<u8>, ControllerError> {
    let payload =
        serde_json::to_vec(records).map_err(|e| ControllerError::Encode(e.to_string()))?;
    let frame_len = FIXED_BYTES + payload.len();
    if frame_len > MAX_FRAME_BYTES {
        return Err(ControllerError::BatchTooLarge {
            size: frame_len,
            limit: MAX_FRAME_BYTES,
        });
    }
    let mut out = Vec::with_capacity(LEN_BYTES + frame_len);
    // frame_len <= MAX_FRAME_BYTES, which fits in u32.
    out.extend_from_slice(&(frame_len as u32).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.push(ENCODING_JSON);
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// What reading the next frame found.
pub(crate) enum FrameRead {
    Batch {
        base_offset: u64,
        records: Vec<MetadataRecord>,
        /// Bytes the frame occupies in the file, length prefix included.
        size: u64,
    },
    /// Clean end of file.
    End,
    /// An incomplete or checksum-failing frame: everything from here on is a torn tail.
    Torn(String),
}

/// Reads the next frame. Errors are I/O errors or frames whose checksum passes but whose
/// content cannot be decoded (damage or a newer format: never silently cut).
pub(crate) fn read_frame(input: &mut impl Read) -> Result<FrameRead, FrameError> {
    let mut len_buf = [0u8; LEN_BYTES];
    match read_full(input, &mut len_buf)? {
        0 => return Ok(FrameRead::End),
        LEN_BYTES => {}
        n => return Ok(FrameRead::Torn(format!("{n}-byte length prefix"))),
    }
    let frame_len = u32::from_be_bytes(len_buf) as usize;
    if !(FIXED_BYTES + 2..=MAX_FRAME_BYTES).contains(&frame_len) {
        return Ok(FrameRead::Torn(format!(
            "impossible frame length {frame_len}"
        )));
    }
    let mut body = vec![0u8; frame_len];
    let got = read_full(input, &mut body)?;
    if got < frame_len {
        return Ok(FrameRead::Torn(format!(
            "frame of {frame_len} bytes cut after {got}"
        )));
    }
    let stored_crc = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    if crc32c::crc32c(&body[4..]) != stored_crc {
        return Ok(FrameRead::Torn("checksum mismatch".to_owned()));
    }
    let mut offset_bytes = [0u8; 8];
    offset_bytes.copy_from_slice(&body[4..12]);
    let base_offset = u64::from_be_bytes(offset_bytes);
    let encoding = body[12];
    if encoding != ENCODING_JSON {
        return Err(FrameError::Undecodable(format!(
            "unknown record encoding {encoding}"
        )));
    }
    let records: Vec<MetadataRecord> = serde_json::from_slice(&body[FIXED_BYTES..])
        .map_err(|e| FrameError::Undecodable(format!("records at offset {base_offset}: {e}")))?;
    if records.is_empty() {
        return Err(FrameError::Undecodable(format!(
            "empty batch at offset {base_offset}"
        )));
    }
    Ok(FrameRead::Batch {
        base_offset,
        records,
        size: (LEN_BYTES + frame_len) as u64,
    })
}

#[derive(Debug)]
pub(crate) enum FrameError {
    Io(std::io::Error),
    Undecodable(String),
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        FrameError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sample() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: Uuid::from_u128(7),
            },
            MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(7),
            },
        ]
    }

    #[test]
    fn frame_round_trips_exactly() {
        let bytes = encode(42, &sample()).unwrap();
        let mut input = &bytes[..];
        match read_frame(&mut input).unwrap() {
            FrameRead::Batch {
                base_offset,
                records,
                size,
            } => {
                assert_eq!(base_offset, 42);
                assert_eq!(records, sample());
                assert_eq!(size, bytes.len() as u64);
            }
            _ => panic!("expected a batch"),
        }
        assert!(matches!(read_frame(&mut input).unwrap(), FrameRead::End));
    }

    #[test]
    fn every_truncation_and_bit_flip_is_a_torn_tail() {
        let bytes = encode(0, &sample()).unwrap();
        for cut in 1..bytes.len() {
            let mut input = &bytes[..cut];
            assert!(
                matches!(read_frame(&mut input).unwrap(), FrameRead::Torn(_)),
                "cut {cut}"
            );
        }
        for pos in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[pos] ^= 0x10;
            let mut input = &damaged[..];
            assert!(
                matches!(read_frame(&mut input).unwrap(), FrameRead::Torn(_)),
                "flip {pos}"
            );
        }
    }

    #[test]
    fn huge_declared_length_is_not_allocated() {
        let bytes = [0xff, 0xff, 0xff, 0xff, 0, 0];
        let mut input = &bytes[..];
        assert!(matches!(
            read_frame(&mut input).unwrap(),
            FrameRead::Torn(_)
        ));
    }
}
