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
    let mut body = BytesMut::with_capacity(size.min(READ_STEP));
    while body.len() < size {
        let want = (size - body.len()).min(READ_STEP);
        body.reserve(want);
        let n = (&mut *r).take(want as u64).read_buf(&mut body).await?;
        if n == 0 {
            return Err(FrameError::Truncated {
                read: body.len(),
                expected: size,
            });
        }
    }
    Ok(Some(body))
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
