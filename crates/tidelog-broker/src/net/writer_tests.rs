//! The connection writer: replies leave in request order, complete replies waiting
//! together go out together, and a reply still waiting does not hold back earlier ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::connection::{write_replies, Reply};
use super::stream::WriteSide;
use crate::metrics::{Metrics, RequestTiming};
use crate::replica::LogDirFailures;

const WAIT: Duration = Duration::from_secs(5);

/// (client side, writer's sender, writer task).
async fn writer() -> (TcpStream, mpsc::Sender<Reply>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect(addr).await.unwrap();
    let (server, peer) = listener.accept().await.unwrap();
    let (_read, write) = server.into_split();
    let (tx, rx) = mpsc::channel(64);
    let task = tokio::spawn(write_replies(
        WriteSide::Tcp(write),
        rx,
        peer,
        Arc::new(Metrics::new()),
        Arc::new(LogDirFailures::new(Vec::new())),
    ));
    (client, tx, task)
}

fn timed(bytes: &'static [u8]) -> Reply {
    let now = Instant::now();
    let timing = RequestTiming {
        api: ApiKey::Produce,
        received: now,
        dispatched: now,
    };
    Reply::Timed(Box::new(Reply::Bytes(Bytes::from_static(bytes))), timing)
}

async fn read_exactly(client: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    tokio::time::timeout(WAIT, client.read_exact(&mut buf))
        .await
        .expect("reply within the wait")
        .unwrap();
    buf
}

#[tokio::test]
async fn replies_leave_in_request_order() {
    let (mut client, tx, task) = writer().await;
    tx.send(timed(b"a")).await.unwrap();
    tx.send(Reply::Bytes(Bytes::from_static(b"bb")))
        .await
        .unwrap();
    tx.send(Reply::Later(Box::pin(async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Reply::Bytes(Bytes::from_static(b"ccc"))
    })))
    .await
    .unwrap();
    tx.send(Reply::Nothing).await.unwrap();
    tx.send(timed(b"dd")).await.unwrap();
    tx.send(timed(b"e")).await.unwrap();
    drop(tx);
    assert_eq!(read_exactly(&mut client, 9).await, b"abbcccdde");
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "nothing after the replies: {rest:?}");
}

#[tokio::test]
async fn a_parked_reply_does_not_hold_back_earlier_ones() {
    let (mut client, tx, _task) = writer().await;
    let (release, released) = oneshot::channel::<()>();
    // Queued together before the writer runs: the first two are complete, the third
    // waits for `release`.
    tx.send(timed(b"x")).await.unwrap();
    tx.send(timed(b"yy")).await.unwrap();
    tx.send(Reply::Later(Box::pin(async move {
        let _ = released.await;
        Reply::Bytes(Bytes::from_static(b"zzz"))
    })))
    .await
    .unwrap();
    assert_eq!(read_exactly(&mut client, 3).await, b"xyy");
    release.send(()).unwrap();
    assert_eq!(read_exactly(&mut client, 3).await, b"zzz");
}

#[tokio::test]
async fn many_waiting_replies_all_arrive() {
    let (mut client, tx, task) = writer().await;
    // More than one coalesced write's worth (64 KiB), each reply distinct.
    let replies: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            let mut reply = vec![(i % 251) as u8; 700];
            reply[..4].copy_from_slice(&i.to_be_bytes());
            reply
        })
        .collect();
    let expected: Vec<u8> = replies.concat();
    let sender = tokio::spawn(async move {
        for reply in replies {
            tx.send(Reply::Bytes(Bytes::from(reply))).await.unwrap();
        }
    });
    assert_eq!(read_exactly(&mut client, expected.len()).await, expected);
    sender.await.unwrap();
    tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
}
