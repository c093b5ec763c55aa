//! A Kafka connection's two halves. A TCP connection (every real one) splits into
//! tokio's owned halves and sends record bytes with `sendfile`; any other connection
//! (the in-memory network of a test) splits generically and copies record bytes from
//! the segment files through a buffer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tidelog_env::net::BoxConnection;
use tidelog_protocol::Chunk;
use tidelog_storage::FileSlice;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

pub(super) enum ReadSide {
    Tcp(OwnedReadHalf),
    Other(ReadHalf<BoxConnection>),
}

pub(crate) enum WriteSide {
    Tcp(OwnedWriteHalf),
    Other(WriteHalf<BoxConnection>),
}

pub(super) fn split(connection: BoxConnection) -> (ReadSide, WriteSide) {
    match connection.into_tcp() {
        Ok(tcp) => {
            let (read, write) = tcp.into_split();
            (ReadSide::Tcp(read), WriteSide::Tcp(write))
        }
        Err(other) => {
            let (read, write) = tokio::io::split(other);
            (ReadSide::Other(read), WriteSide::Other(write))
        }
    }
}

impl WriteSide {
    /// Closes a connection that never got to its first request.
    pub(super) async fn shutdown_quietly(mut self) -> io::Result<()> {
        tokio::io::AsyncWriteExt::shutdown(&mut self).await
    }

    /// Writes a fetch response: its chunks in order, external ones from `files`.
    pub(super) async fn write_chunks(
        &mut self,
        chunks: &[Chunk],
        files: &[FileSlice],
    ) -> io::Result<()> {
        match self {
            WriteSide::Tcp(write) => {
                super::sendfile::write_chunks(write.as_ref(), chunks, files).await
            }
            WriteSide::Other(write) => super::sendfile::copy_chunks(write, chunks, files).await,
        }
    }
}

impl AsyncRead for ReadSide {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadSide::Tcp(read) => Pin::new(read).poll_read(cx, buf),
            ReadSide::Other(read) => Pin::new(read).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteSide {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(write) => Pin::new(write).poll_write(cx, buf),
            WriteSide::Other(write) => Pin::new(write).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(write) => Pin::new(write).poll_flush(cx),
            WriteSide::Other(write) => Pin::new(write).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(write) => Pin::new(write).poll_shutdown(cx),
            WriteSide::Other(write) => Pin::new(write).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(write) => Pin::new(write).poll_write_vectored(cx, bufs),
            WriteSide::Other(write) => Pin::new(write).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteSide::Tcp(write) => write.is_write_vectored(),
            WriteSide::Other(write) => write.is_write_vectored(),
        }
    }
}
