//! The HTTP admin port: `/healthz` (the process is up) and `/readyz` (metadata loaded,
//! logs recovered, Kafka listener accepting). A deliberately tiny HTTP/1.1 responder:
//! one request per connection, bounded request size and time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn serve(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let ready = Arc::clone(&ready);
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, ready)).await;
                    });
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

async fn answer(mut stream: TcpStream, ready: Arc<AtomicBool>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let request_line = String::from_utf8_lossy(&head);
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/healthz" => ("200 OK", "ok\n"),
        "/readyz" if ready.load(Ordering::Acquire) => ("200 OK", "ready\n"),
        "/readyz" => ("503 Service Unavailable", "not ready\n"),
        _ => ("404 Not Found", "not found\n"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
