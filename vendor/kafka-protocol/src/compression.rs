//! Provides compression utilities for encoding records.
//!
//! This module has implementations of gzip, Snappy, as well as a noop compression format that
//! allows encoding and decoding records into a [`Record`](crate::records::Record).

use crate::protocol::buf::{ByteBuf, ByteBufMut};
use anyhow::Result;

#[cfg(feature = "gzip")]
mod gzip;
#[cfg(feature = "lz4")]
mod lz4;
mod none;
#[cfg(feature = "snappy")]
mod snappy;
#[cfg(feature = "zstd")]
mod zstd;

#[cfg(feature = "gzip")]
pub use gzip::Gzip;
#[cfg(feature = "lz4")]
pub use lz4::Lz4;
pub use none::None;
#[cfg(feature = "snappy")]
pub use snappy::Snappy;
#[cfg(feature = "zstd")]
pub use zstd::Zstd;

/// A trait for record compression algorithms.
pub trait Compressor<B: ByteBufMut> {
    /// Target buffer type for compression.
    type BufMut: ByteBufMut;
    /// Compresses into provided [`ByteBufMut`], with records encoded by `F` into `R`.
    fn compress<R, F>(buf: &mut B, f: F) -> Result<R>
    where
        F: FnOnce(&mut Self::BufMut) -> Result<R>;
}

/// tidelog patch: the most bytes a decompressor produces by default. A few bytes of a
/// hostile batch (a zstd/gzip/lz4 "bomb", a snappy header declaring 4 GiB) must not make
/// the decoder allocate without limit. Kafka batches are at most `message.max.bytes`
/// compressed (1 MiB by default); 128 MiB leaves room for very compressible data.
pub const MAX_DECOMPRESSED_BYTES: usize = 128 * 1024 * 1024;

/// A trait for record decompression algorithms.
pub trait Decompressor<B: ByteBuf> {
    /// Target buffer type for decompression.
    type Buf: ByteBuf;
    /// Decompress records from `B` mapped using `F` into `R`.
    ///
    /// tidelog patch: fails when the output would exceed [`MAX_DECOMPRESSED_BYTES`].
    fn decompress<R, F>(buf: &mut B, f: F) -> Result<R>
    where
        F: FnOnce(&mut Self::Buf) -> Result<R>,
    {
        Self::decompress_limited(buf, MAX_DECOMPRESSED_BYTES, f)
    }
    /// tidelog patch: decompress, failing as soon as the output would exceed `limit` bytes.
    fn decompress_limited<R, F>(buf: &mut B, limit: usize, f: F) -> Result<R>
    where
        F: FnOnce(&mut Self::Buf) -> Result<R>;
}

/// tidelog patch: a writer that refuses to grow past `remaining` bytes, so streaming
/// decompressors stop at the cap instead of after the damage.
#[cfg(any(feature = "gzip", feature = "zstd", feature = "lz4"))]
pub(crate) struct LimitedWriter<W> {
    inner: W,
    remaining: usize,
}

#[cfg(any(feature = "gzip", feature = "zstd", feature = "lz4"))]
impl<W> LimitedWriter<W> {
    pub(crate) fn new(inner: W, limit: usize) -> Self {
        Self {
            inner,
            remaining: limit,
        }
    }
    pub(crate) fn into_inner(self) -> W {
        self.inner
    }
}

#[cfg(any(feature = "gzip", feature = "zstd", feature = "lz4"))]
impl<W: std::io::Write> std::io::Write for LimitedWriter<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if data.len() > self.remaining {
            return Err(std::io::Error::other(
                "decompressed data exceeds the configured limit",
            ));
        }
        let n = self.inner.write(data)?;
        self.remaining -= n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
