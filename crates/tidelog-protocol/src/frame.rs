//! Kafka framing: every request and response is an `i32` big-endian size followed by that
//! many bytes. The size is checked before a single byte of the body is buffered.

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Kafka's `socket.request.max.bytes` default: 100 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 * 1024 * 1024;

/// The buffer grows by at most this much per read, so a peer that declares a large frame
/// and then sends nothing holds at most this much of our memory, not the declared size.
const READ_STEP: usize = 64 * 1024;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The declared size is larger than the configured limit.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The declared size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The declared size is negative.
    #[error("negative frame size {size}")]
    Negative {
        /// The declared size.
        size: i32,
    },
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed after {read} of {expected} bytes of a frame")]
    Truncated {
        /// Bytes received (of the size prefix while `expected == 4` and nothing was
        /// decoded yet, else of the body).
        read: usize,
        /// Bytes that were due.
        expected: usize,
    },
    /// The underlying reader failed.
    #[error("i/o error while reading a frame")]
    Io(#[from] std::io::Error),
}

/// Reads one frame and returns its body (without the size prefix).
///
/// Returns `Ok(None)` when the reader is at end of stream before the first byte of a frame
/// (the peer closed cleanly between requests). A negative size or one above `max_bytes`
/// fails before anything is allocated; the body buffer then grows only as bytes arrive.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
) -> Result<Option<BytesMut>, FrameError> {
    let Some(size) = read_size(r, max_bytes).await? else {
        return Ok(None);
    };
    let mut body = BytesMut::with_capacity(size.min(READ_STEP));
    fill(r, &mut body, size, size).await?;
    Ok(Some(body))
}

/// Bytes at the start of every request header: api key, api version, correlation id.
pub const REQUEST_PREFIX_LEN: usize = 8;

/// A request frame, or the identity of one that was refused unread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFrame {
    /// The whole frame (without size prefix); its header starts it.
    Accepted(BytesMut),
    /// The caller refused this api key / version; the rest of the frame was read and
    /// dropped without being buffered, so the stream is positioned at the next frame.
    Refused {
        /// The raw api key.
        api_key: i16,
        /// The api version.
        api_version: i16,
        /// To answer with (e.g. UNSUPPORTED_VERSION for ApiVersions).
        correlation_id: i32,
    },
}

/// Like [`read_frame`] for a server: after the size, reads only the fixed 8 header bytes
/// and asks `accept(api_key, api_version)` before buffering the body. A refused request
/// costs no memory beyond a small read buffer however large its declared size.
/// Frames shorter than 8 bytes are returned as `Accepted` (header decoding reports them).
pub async fn read_request_frame<R, F>(
    r: &mut R,
    max_bytes: usize,
    accept: F,
) -> Result<Option<RequestFrame>, FrameError>
where
    R: AsyncRead + Unpin,
    F: FnOnce(i16, i16) -> bool,
{
    let Some(size) = read_size(r, max_bytes).await? else {
        return Ok(None);
    };
    let mut body = BytesMut::with_capacity(size.min(READ_STEP));
    fill(r, &mut body, size.min(REQUEST_PREFIX_LEN), size).await?;
    if let Some(&[k0, k1, v0, v1, c0, c1, c2, c3]) = body.get(..REQUEST_PREFIX_LEN) {
        let api_key = i16::from_be_bytes([k0, k1]);
        let api_version = i16::from_be_bytes([v0, v1]);
        if !accept(api_key, api_version) {
            let rest = (size - REQUEST_PREFIX_LEN) as u64;
            let skipped =
                tokio::io::copy(&mut (&mut *r).take(rest), &mut tokio::io::sink()).await?;
            if skipped < rest {
                return Err(FrameError::Truncated {
                    read: REQUEST_PREFIX_LEN + skipped as usize,
                    expected: size,
                });
            }
            return Ok(Some(RequestFrame::Refused {
                api_key,
                api_version,
                correlation_id: i32::from_be_bytes([c0, c1, c2, c3]),
            }));
        }
    }
    fill(r, &mut body, size, size).await?;
    Ok(Some(RequestFrame::Accepted(body)))
}

/// Reads the size prefix: `None` on clean end of stream, checked against `max_bytes`.
async fn read_size<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
) -> Result<Option<usize>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < prefix.len() {
        let n = r.read(&mut prefix[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(FrameError::Truncated {
                read: got,
                expected: prefix.len(),
            });
        }
        got += n;
    }
    let declared = i32::from_be_bytes(prefix);
    let size = usize::try_from(declared).map_err(|_| FrameError::Negative { size: declared })?;
    if size > max_bytes {
        return Err(FrameError::TooLarge {
            size,
            max: max_bytes,
        });
    }
    Ok(Some(size))
}

/// Reads into `body` until it holds `target` bytes, growing at most `READ_STEP` at a time.
/// `frame_size` is only for the error report.
async fn fill<R: AsyncRead + Unpin>(
    r: &mut R,
    body: &mut BytesMut,
    target: usize,
    frame_size: usize,
) -> Result<(), FrameError> {
    while body.len() < target {
        let want = (target - body.len()).min(READ_STEP);
        body.reserve(want);
        let n = (&mut *r).take(want as u64).read_buf(body).await?;
        if n == 0 {
            return Err(FrameError::Truncated {
                read: body.len(),
                expected: frame_size,
            });
        }
    }
    Ok(())
}

/// Prefixes `body` with its size. Fails when the body is longer than `i32::MAX`.
pub fn encode_frame(body: &[u8]) -> Result<BytesMut, FrameError> {
    let size = i32::try_from(body.len()).map_err(|_| FrameError::TooLarge {
        size: body.len(),
        max: i32::MAX as usize,
    })?;
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_i32(size);
    out.put_slice(body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn reads_consecutive_frames_then_clean_eof() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&encode_frame(b"hello").unwrap());
        wire.extend_from_slice(&encode_frame(b"").unwrap());
        wire.extend_from_slice(&encode_frame(&[7u8; 200_000]).unwrap());
        let mut r = wire.as_slice();
        block_on(async {
            assert_eq!(
                &read_frame(&mut r, 1 << 20).await.unwrap().unwrap()[..],
                b"hello"
            );
            assert!(read_frame(&mut r, 1 << 20)
                .await
                .unwrap()
                .unwrap()
                .is_empty());
            let big = read_frame(&mut r, 1 << 20).await.unwrap().unwrap();
            assert_eq!(big.len(), 200_000);
            assert!(big.iter().all(|&b| b == 7));
            assert!(read_frame(&mut r, 1 << 20).await.unwrap().is_none());
        });
    }

    #[test]
    fn rejects_negative_and_oversized_sizes() {
        block_on(async {
            let mut r: &[u8] = &[0xff, 0xff, 0xff, 0xff];
            assert!(matches!(
                read_frame(&mut r, 100).await,
                Err(FrameError::Negative { size: -1 })
            ));
            // 2 GiB - 1 declared, nothing sent: must fail on the size alone.
            let mut r: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
            assert!(matches!(
                read_frame(&mut r, DEFAULT_MAX_REQUEST_BYTES).await,
                Err(FrameError::TooLarge {
                    size: 0x7fff_ffff,
                    ..
                })
            ));
            let mut r: &[u8] = &[0, 0, 0, 101];
            assert!(matches!(
                read_frame(&mut r, 100).await,
                Err(FrameError::TooLarge {
                    size: 101,
                    max: 100
                })
            ));
        });
    }

    #[test]
    fn refused_requests_are_skipped_and_the_stream_stays_in_step() {
        let mut wire = Vec::new();
        // Metadata v99 with a 1 MiB body, then ApiVersions v3 with a 3-byte body.
        let mut big = vec![0, 3, 0, 99, 0, 0, 0, 42];
        big.resize(8 + (1 << 20), 0xee);
        wire.extend_from_slice(&encode_frame(&big).unwrap());
        let small = [0, 18, 0, 3, 0, 0, 0, 43, 1, 2, 3];
        wire.extend_from_slice(&encode_frame(&small).unwrap());
        wire.extend_from_slice(&encode_frame(&[0, 1]).unwrap());
        let mut r = wire.as_slice();
        let accept = |key: i16, version: i16| key != 3 || version <= 12;
        block_on(async {
            let first = read_request_frame(&mut r, 2 << 20, accept).await.unwrap();
            assert_eq!(
                first,
                Some(RequestFrame::Refused {
                    api_key: 3,
                    api_version: 99,
                    correlation_id: 42
                })
            );
            let second = read_request_frame(&mut r, 2 << 20, accept).await.unwrap();
            assert_eq!(
                second,
                Some(RequestFrame::Accepted(BytesMut::from(&small[..])))
            );
            // shorter than the fixed header: handed over for header decoding to reject
            let third = read_request_frame(&mut r, 2 << 20, |_, _| false)
                .await
                .unwrap();
            assert_eq!(
                third,
                Some(RequestFrame::Accepted(BytesMut::from(&[0u8, 1][..])))
            );
            assert_eq!(
                read_request_frame(&mut r, 2 << 20, accept).await.unwrap(),
                None
            );
        });
    }

    #[test]
    fn refused_request_cut_short_is_truncated() {
        let mut wire = vec![0, 0, 0, 100];
        wire.extend_from_slice(&[0, 3, 0, 99, 0, 0, 0, 42, 1, 2]);
        let mut r = wire.as_slice();
        block_on(async {
            assert!(matches!(
                read_request_frame(&mut r, 1000, |_, _| false).await,
                Err(FrameError::Truncated {
                    read: 10,
                    expected: 100
                })
            ));
        });
    }

    #[test]
    fn truncation_is_an_error_not_eof() {
        block_on(async {
            let mut r: &[u8] = &[0, 0];
            assert!(matches!(
                read_frame(&mut r, 100).await,
                Err(FrameError::Truncated {
                    read: 2,
                    expected: 4
                })
            ));
            let mut r: &[u8] = &[0, 0, 0, 10, 1, 2, 3];
            assert!(matches!(
                read_frame(&mut r, 100).await,
                Err(FrameError::Truncated {
                    read: 3,
                    expected: 10
                })
            ));
        });
    }

    #[test]
    fn large_declared_size_then_close_is_truncated() {
        // 50 MiB declared, 3 bytes sent, then close: an error, after reading only what arrived.
        block_on(async {
            let (mut client, mut server) = tokio::io::duplex(1024);
            use tokio::io::AsyncWriteExt;
            client
                .write_all(&[0x03, 0x20, 0x00, 0x00, 1, 2, 3])
                .await
                .unwrap();
            drop(client);
            let err = read_frame(&mut server, DEFAULT_MAX_REQUEST_BYTES).await;
            assert!(matches!(
                err,
                Err(FrameError::Truncated {
                    read: 3,
                    expected: 0x0320_0000
                })
            ));
        });
    }
}
