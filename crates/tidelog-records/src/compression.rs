//! Compressing a records block, and decompressing it with a bound on the output.
//!
//! Every decompression here produces at most `limit` bytes: a batch that inflates past
//! it is refused with [`RecordsError::InflatedTooLarge`] as soon as the limit is
//! crossed, so a small hostile batch cannot make the process allocate gigabytes. The
//! streaming form ([`decompressing_reader`]) holds only the codec's own state (gzip's
//! 32 KiB window, an LZ4 block of at most 4 MiB, a zstd window, one snappy chunk).

use std::borrow::Cow;
use std::io::{self, Read, Write};

use crate::error::RecordsError;
use crate::header::{BatchHeader, Codec, BATCH_HEADER_LEN};

/// The header the Java client (snappy-java) puts before xerial-framed snappy chunks:
/// magic, then format version 1 and minimum compatible version 1.
const XERIAL_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
/// Uncompressed bytes per xerial chunk, snappy-java's default block size.
const XERIAL_CHUNK: usize = 32 << 10;
/// LZ4 level of the Java client's default (and kafka-protocol's).
const LZ4_LEVEL: u32 = 4;
/// zstd's default level, which Kafka clients also default to.
const ZSTD_LEVEL: i32 = 3;

fn compress_failed(codec: Codec, e: impl std::fmt::Display) -> RecordsError {
    RecordsError::Unencodable(format!("compressing with {codec:?}: {e}"))
}

/// `records` compressed as one block with `codec` (a copy for [`Codec::None`]).
pub fn compress(codec: Codec, records: &[u8]) -> Result<Vec<u8>, RecordsError> {
    let failed = |e: io::Error| compress_failed(codec, e);
    match codec {
        Codec::None => Ok(records.to_vec()),
        Codec::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(records).map_err(failed)?;
            gz.finish().map_err(failed)
        }
        Codec::Snappy => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut encoder = snap::raw::Encoder::new();
            for chunk in records.chunks(XERIAL_CHUNK) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| compress_failed(codec, e))?;
                let len = u32::try_from(block.len()).map_err(|e| compress_failed(codec, e))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Codec::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .level(LZ4_LEVEL)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .map_err(failed)?;
            encoder.write_all(records).map_err(failed)?;
            let (out, result) = encoder.finish();
            result.map_err(failed)?;
            Ok(out)
        }
        Codec::Zstd => zstd::stream::encode_all(records, ZSTD_LEVEL).map_err(failed),
    }
}

/// The records block of a whole batch, decompressed if needed into at most `limit`
/// bytes; borrowed when the batch is not compressed.
pub fn records_block(batch: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, RecordsError> {
    let header = BatchHeader::new(batch)?;
    let codec = header
        .codec()
        .ok_or_else(|| RecordsError::corrupt("unknown compression codec"))?;
    let body = &batch[BATCH_HEADER_LEN..];
    if codec == Codec::None {
        return Ok(Cow::Borrowed(body));
    }
    let mut out = Vec::new();
    decompressing_reader(codec, body, limit)?
        .read_to_end(&mut out)
        .map_err(read_error)?;
    Ok(Cow::Owned(out))
}

/// A reader of `body` decompressed with `codec` that fails once more than `limit`
/// bytes come out. Errors it returns are turned into [`RecordsError`]s by
/// [`read_error`].
pub fn decompressing_reader<'a>(
    codec: Codec,
    body: &'a [u8],
    limit: usize,
) -> Result<Box<dyn Read + 'a>, RecordsError> {
    let bad = |e: io::Error| RecordsError::corrupt(format!("{codec:?} data: {e}"));
    let inner: Box<dyn Read + 'a> = match codec {
        Codec::None => Box::new(body),
        Codec::Gzip => Box::new(GzipReader(flate2::bufread::GzDecoder::new(body))),
        Codec::Snappy => Box::new(SnappyReader::new(body, limit)),
        Codec::Lz4 => Box::new(lz4::Decoder::new(body).map_err(bad)?),
        Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(body).map_err(bad)?),
    };
    Ok(Box::new(Capped {
        inner,
        left: limit,
        limit,
    }))
}

/// The error a [`Capped`] reader reports once its limit is crossed.
#[derive(Debug)]
struct LimitCrossed(usize);

impl std::fmt::Display for LimitCrossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "decompressed records exceed {} bytes", self.0)
    }
}

impl std::error::Error for LimitCrossed {}

/// Maps an error of a [`decompressing_reader`]: the limit, or undecodable data.
pub fn read_error(e: io::Error) -> RecordsError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<LimitCrossed>())
    {
        Some(LimitCrossed(limit)) => RecordsError::InflatedTooLarge { limit: *limit },
        None => RecordsError::corrupt(format!("decompression failed: {e}")),
    }
}

/// Passes at most `limit` bytes through; asking for more after that is an error.
struct Capped<R> {
    inner: R,
    left: usize,
    limit: usize,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // One byte more than the limit tells "exactly at the limit" from "past it".
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(LimitCrossed(self.limit))),
            };
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        Ok(n)
    }
}

/// One gzip member, as every Kafka client writes it, and nothing after it: bytes past
/// the member's end are refused rather than ignored, because some readers (the Rust
/// clients' kafka-protocol among them) fail on them, and a stored batch must be readable
/// by every consumer.
struct GzipReader<'a>(flate2::bufread::GzDecoder<&'a [u8]>);

impl Read for GzipReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        let after = self.0.get_ref().len();
        if n == 0 && !buf.is_empty() && after > 0 {
            return Err(io::Error::other(format!(
                "{after} bytes after the end of the gzip stream"
            )));
        }
        Ok(n)
    }
}

/// Snappy as Kafka clients write it: xerial framing (header, then `u32 length, raw
/// block` chunks) from the Java client, or a single raw block from others. Decodes one
/// chunk at a time, checking each chunk's declared size against what the limit leaves
/// before allocating for it.
struct SnappyReader<'a> {
    rest: &'a [u8],
    raw_block: bool,
    /// The xerial format version, when below 1: snappy-java (what Kafka reads with)
    /// refuses such a stream, so it is refused here too. Its minimum compatible version
    /// is ignored, as snappy-java ignores it.
    incompatible_version: Option<i32>,
    limit_left: usize,
    limit: usize,
    chunk: Vec<u8>,
    chunk_pos: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(body: &'a [u8], limit: usize) -> Self {
        let xerial = body.len() >= XERIAL_HEADER.len() && body[..8] == XERIAL_HEADER[..8];
        let version = xerial.then(|| i32::from_be_bytes([body[8], body[9], body[10], body[11]]));
        SnappyReader {
            incompatible_version: version.filter(|v| *v < 1),
            rest: if xerial {
                &body[XERIAL_HEADER.len()..]
            } else {
                body
            },
            raw_block: !xerial,
            limit_left: limit,
            limit,
            chunk: Vec::new(),
            chunk_pos: 0,
        }
    }

    fn next_block(&mut self) -> io::Result<Option<&'a [u8]>> {
        if let Some(version) = self.incompatible_version {
            return Err(io::Error::other(format!(
                "xerial snappy format version {version}: readers need 1 or above"
            )));
        }
        if self.rest.is_empty() {
            return Ok(None);
        }
        if self.raw_block {
            return Ok(Some(std::mem::take(&mut self.rest)));
        }
        let truncated = || io::Error::other("truncated xerial snappy chunk");
        let len_bytes = self.rest.get(..4).ok_or_else(truncated)?;
        let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let end = 4usize
            .checked_add(len as usize)
            .filter(|&e| e <= self.rest.len())
            .ok_or_else(truncated)?;
        let block = &self.rest[4..end];
        self.rest = &self.rest[end..];
        Ok(Some(block))
    }

    fn fill(&mut self) -> io::Result<bool> {
        let Some(block) = self.next_block()? else {
            return Ok(false);
        };
        let bad = |e: snap::Error| io::Error::other(format!("snappy: {e}"));
        let len = snap::raw::decompress_len(block).map_err(bad)?;
        if len > self.limit_left {
            // Would inflate past the limit: refuse before allocating for it.
            return Err(io::Error::other(LimitCrossed(self.limit)));
        }
        self.limit_left -= len;
        self.chunk.resize(len, 0);
        let written = snap::raw::Decoder::new()
            .decompress(block, &mut self.chunk)
            .map_err(bad)?;
        self.chunk.truncate(written);
        self.chunk_pos = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk_pos == self.chunk.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.chunk.len() - self.chunk_pos);
        buf[..n].copy_from_slice(&self.chunk[self.chunk_pos..self.chunk_pos + n]);
        self.chunk_pos += n;
        Ok(n)
    }
}
