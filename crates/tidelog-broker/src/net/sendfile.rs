//! Writes an encoded response to a socket, sending record bytes straight from segment
//! files with `sendfile(2)`: the kernel copies page cache to socket, and the record bytes
//! never enter this process's memory.
//!
//! The response comes from `tidelog_protocol::encode_fetch_response` as chunks; each
//! `Chunk::External { id, len }` names `files[id]`, whose `len` must equal the chunk's (the
//! size prefix already promised those bytes to the client). Where the kernel or the file
//! system refuses `sendfile` (EINVAL, ENOSYS), the slice is copied with `pread` + write
//! through a 64 KiB buffer instead.
//!
//! Like Kafka's network threads, a `sendfile` of bytes not in the page cache blocks this
//! task's thread on the disk read; fetches are normally of recent, cached data.
//!
//! With a split stream, pass `write_half.as_ref()` (`OwnedWriteHalf: AsRef<TcpStream>`).
//!
//! This is the one broker module allowed `unsafe`: the `libc::sendfile` call.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use tidelog_protocol::Chunk;
use tidelog_storage::FileSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// A segment file could not be read while its bytes were being sent (the disk failed,
/// not the peer): carried inside the `io::Error` so the connection can report it.
#[derive(Debug, thiserror::Error)]
#[error("reading {} failed: {source}", file.display())]
pub(crate) struct SliceReadFailed {
    /// The file, as `/proc/self/fd` names it.
    pub(crate) file: PathBuf,
    #[source]
    pub(crate) source: io::Error,
}

impl SliceReadFailed {
    /// The failure as the storage engine would have reported it (the errno kept, so it
    /// is classified the same).
    pub(crate) fn storage_error(&self) -> tidelog_storage::StorageError {
        tidelog_storage::StorageError::copied_io(&self.source)
    }
}

/// Marks `e`, from reading `slice`'s file, as the file's failure.
fn read_failed(slice: &FileSlice, e: io::Error) -> io::Error {
    let link = format!("/proc/self/fd/{}", slice.file.as_raw_fd());
    let file = std::fs::read_link(link).unwrap_or_default();
    io::Error::new(e.kind(), SliceReadFailed { file, source: e })
}

/// Linux transfers at most this much per `sendfile` call.
const SENDFILE_MAX: u64 = 0x7fff_f000;
/// Buffer of the pread fallback.
const FALLBACK_BUF: usize = 64 * 1024;

/// Writes `chunks` in order to `stream`, filling external chunks from `files`.
///
/// Any error leaves the response partly written, so the caller must close the connection.
pub(crate) async fn write_chunks(
    stream: &TcpStream,
    chunks: &[Chunk],
    files: &[FileSlice],
) -> io::Result<()> {
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) => write_all(stream, bytes).await?,
            Chunk::External { id, len } => send_slice(stream, external(files, *id, *len)?).await?,
        }
    }
    Ok(())
}

async fn write_all(stream: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match stream.try_write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends the whole slice, with sendfile while the kernel accepts it, then by copying.
async fn send_slice(stream: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let end = slice
        .position
        .checked_add(slice.len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "slice end overflows"))?;
    let mut position = slice.position;
    while position < end {
        let count = (end - position).min(SENDFILE_MAX);
        let result = stream.try_io(Interest::WRITABLE, || {
            sendfile_once(stream.as_raw_fd(), slice, position, count)
        });
        match result {
            Ok(0) => return Err(truncated(slice, position)),
            Ok(n) => position += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
                return copy_range(stream, slice, position, end).await;
            }
            // sendfile reports a failed read of its source file as EIO.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => return Err(read_failed(slice, e)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One `sendfile` call of at most `count` bytes from `position`; returns bytes sent.
fn sendfile_once(socket: i32, slice: &FileSlice, position: u64, count: u64) -> io::Result<u64> {
    let mut offset = libc::off_t::try_from(position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // `count` is at most SENDFILE_MAX, which fits usize on every supported target.
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    // SAFETY: both descriptors are open for the duration of the call: `socket` belongs to
    // the borrowed TcpStream and the file to the borrowed FileSlice's Arc<File>. `offset`
    // is a valid, exclusively borrowed off_t the kernel updates; sendfile does not retain
    // any pointer after returning.
    let sent = unsafe { libc::sendfile(socket, slice.file.as_raw_fd(), &mut offset, count) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as u64)
}

/// Writes `chunks` to a connection that is not a socket (the in-memory network of a
/// test): external chunks are read from their files through a bounded buffer.
pub(crate) async fn copy_chunks(
    out: &mut (impl AsyncWrite + Unpin),
    chunks: &[Chunk],
    files: &[FileSlice],
) -> io::Result<()> {
    let mut buf = vec![0u8; FALLBACK_BUF];
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) => out.write_all(bytes).await?,
            Chunk::External { id, len } => {
                let slice = external(files, *id, *len)?;
                let end = slice.position.saturating_add(slice.len);
                let mut position = slice.position;
                while position < end {
                    let piece = read_piece(slice, position, end, &mut buf)?;
                    out.write_all(piece).await?;
                    position += piece.len() as u64;
                }
            }
        }
    }
    out.flush().await
}

/// The file slice an external chunk names, checked against the length it promised.
fn external(files: &[FileSlice], id: usize, len: u64) -> io::Result<&FileSlice> {
    let slice = files.get(id).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("no file slice {id}"))
    })?;
    if slice.len != len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("chunk wants {len} bytes, slice {id} has {}", slice.len),
        ));
    }
    Ok(slice)
}

/// The fallback: pread into a bounded buffer, write it out, repeat.
async fn copy_range(stream: &TcpStream, slice: &FileSlice, start: u64, end: u64) -> io::Result<()> {
    let mut buf = vec![0u8; FALLBACK_BUF];
    let mut position = start;
    while position < end {
        let piece = read_piece(slice, position, end, &mut buf)?;
        write_all(stream, piece).await?;
        position += piece.len() as u64;
    }
    Ok(())
}

/// The next bytes of `slice` from `position` (before `end`), at most a buffer's worth;
/// never empty (a file that ends early is an error).
fn read_piece<'b>(
    slice: &FileSlice,
    position: u64,
    end: u64,
    buf: &'b mut [u8],
) -> io::Result<&'b [u8]> {
    let want = usize::try_from(end - position)
        .unwrap_or(usize::MAX)
        .min(buf.len());
    let n = slice
        .file
        .read_at(&mut buf[..want], position)
        .map_err(|e| read_failed(slice, e))?;
    if n == 0 {
        return Err(truncated(slice, position));
    }
    Ok(&buf[..n])
}

fn truncated(slice: &FileSlice, position: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "file ended at {position}, slice runs to {}",
            slice.position + slice.len
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::io::Write;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    const TIMEOUT: Duration = Duration::from_secs(20);

    fn temp_file(content: &[u8]) -> Arc<std::fs::File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(content).unwrap();
        Arc::new(f)
    }

    /// A loopback connection whose receiving end has a small buffer, so large writes
    /// fill the socket and the writer has to wait for writability (EAGAIN path).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let (client, server) = tokio::join!(socket.connect(addr), listener.accept());
        (client.unwrap(), server.unwrap().0)
    }

    /// Writes `chunks` on one end and reads until EOF on the other, concurrently (the
    /// payloads exceed socket buffers, so the writer must wait for writability).
    async fn transfer(chunks: Vec<Chunk>, files: Vec<FileSlice>) -> (io::Result<()>, Vec<u8>) {
        let (mut client, server) = pair().await;
        let writer = tokio::spawn(async move {
            let result = write_chunks(&server, &chunks, &files).await;
            drop(server);
            result
        });
        // Let the writer run into a full socket before anything is read.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut received = Vec::new();
        tokio::time::timeout(TIMEOUT, client.read_to_end(&mut received))
            .await
            .expect("reader timed out")
            .unwrap();
        let result = tokio::time::timeout(TIMEOUT, writer)
            .await
            .expect("writer timed out")
            .unwrap();
        (result, received)
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[tokio::test]
    async fn bytes_and_file_slices_arrive_in_order() {
        // Larger than the kernel's maximum socket send buffer (4 MiB by default).
        let file_a = pattern(12 << 20, 1);
        let file_b = pattern(100_000, 7);
        let a = temp_file(&file_a);
        let b = temp_file(&file_b);
        let files = vec![
            FileSlice {
                file: a.clone(),
                position: 12_345,
                len: (10 << 20) + 17,
            },
            FileSlice {
                file: b,
                position: 0,
                len: 100_000,
            },
            FileSlice {
                file: a,
                position: 0,
                len: 0,
            },
        ];
        let chunks = vec![
            Chunk::Bytes(Bytes::from_static(b"head")),
            Chunk::External {
                id: 0,
                len: (10 << 20) + 17,
            },
            Chunk::Bytes(Bytes::from(pattern(300_000, 3))),
            Chunk::External { id: 2, len: 0 },
            Chunk::External {
                id: 1,
                len: 100_000,
            },
            Chunk::Bytes(Bytes::from_static(b"tail")),
        ];
        let (result, received) = transfer(chunks, files).await;
        result.unwrap();
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&file_a[12_345..12_345 + (10 << 20) + 17]);
        expected.extend_from_slice(&pattern(300_000, 3));
        expected.extend_from_slice(&file_b);
        expected.extend_from_slice(b"tail");
        assert_eq!(received.len(), expected.len());
        assert!(received == expected, "bytes differ");
    }

    #[tokio::test]
    async fn pread_fallback_sends_the_same_bytes() {
        let content = pattern(1 << 20, 9);
        let slice = FileSlice {
            file: temp_file(&content),
            position: 1000,
            len: 500_000,
        };
        let (mut client, server) = pair().await;
        let writer = tokio::spawn(async move {
            let result = copy_range(&server, &slice, 1000, 501_000).await;
            drop(server);
            result
        });
        let mut received = Vec::new();
        tokio::time::timeout(TIMEOUT, client.read_to_end(&mut received))
            .await
            .expect("reader timed out")
            .unwrap();
        writer.await.unwrap().unwrap();
        assert!(received == content[1000..501_000], "bytes differ");
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_slice_is_an_error() {
        let file = temp_file(&pattern(1000, 0));
        let files = vec![FileSlice {
            file,
            position: 500,
            len: 1000,
        }];
        let chunks = vec![Chunk::External { id: 0, len: 1000 }];
        let (result, received) = transfer(chunks, files).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(received.len(), 500);
    }

    #[tokio::test]
    async fn mismatched_chunks_are_refused_before_writing() {
        let file = temp_file(&pattern(10, 0));
        let files = vec![FileSlice {
            file,
            position: 0,
            len: 10,
        }];
        for chunk in [
            Chunk::External { id: 1, len: 10 },
            Chunk::External { id: 0, len: 9 },
        ] {
            let (result, received) = transfer(vec![chunk], files.clone()).await;
            assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidInput);
            assert!(received.is_empty());
        }
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_read_is_named_in_the_error() {
        // A directory opened as a file: every read of it fails (EISDIR), as a failing
        // disk's would (EIO), on the copying path the in-memory network takes.
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(std::fs::File::open(dir.path()).unwrap());
        let files = vec![FileSlice {
            file,
            position: 0,
            len: 10,
        }];
        let chunks = vec![Chunk::External { id: 0, len: 10 }];
        let mut out = Vec::new();
        let err = copy_chunks(&mut out, &chunks, &files).await.unwrap_err();
        let failed = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<SliceReadFailed>())
            .expect("the error names the file");
        assert_eq!(failed.file, std::fs::canonicalize(dir.path()).unwrap());
        let storage = failed.storage_error();
        assert!(!storage.is_disk_failure(), "EISDIR is not the disk failing");
        assert!(storage.to_string().contains("os error 21"), "{storage}");
    }
}
