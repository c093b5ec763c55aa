//! The in-memory network behaves as the TCP paths it stands in for: bytes arrive in
//! order, nobody listening is a refusal, and a cut link holds everything back until
//! it heals, after which nothing is lost.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tidelog_env::net::{BoxConnection, Listener, MemoryNetwork, TcpTransport, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(10);
const STALL: Duration = Duration::from_millis(200);

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

async fn pair(
    client: &dyn Transport,
    listener: &mut Box<dyn Listener>,
) -> (BoxConnection, BoxConnection, SocketAddr) {
    let addr = listener.local_addr().to_string();
    let (dialled, accepted) = tokio::join!(client.connect(&addr), listener.accept());
    let (server, from) = accepted.unwrap();
    (dialled.unwrap(), server, from)
}

#[tokio::test]
async fn bytes_cross_both_ways_in_order_and_nobody_listening_is_refused() {
    let net = MemoryNetwork::new();
    let (a, b) = (net.host(ip(1)), net.host(ip(2)));
    let mut listener = b
        .listen(&SocketAddr::new(ip(2), 0).to_string())
        .await
        .unwrap();
    assert_eq!(listener.local_addr().ip(), ip(2));
    let (mut client, mut server, from) = pair(&a, &mut listener).await;
    assert_eq!(from.ip(), ip(1));

    let request: Vec<u8> = (0..=255u8).cycle().take(600_000).collect();
    let writer = tokio::spawn(async move {
        client.write_all(&request).await.unwrap();
        let mut answer = [0u8; 5];
        client.read_exact(&mut answer).await.unwrap();
        answer
    });
    let mut got = vec![0u8; 600_000];
    tokio::time::timeout(WAIT, server.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert!(got.iter().copied().eq((0..=255u8).cycle().take(600_000)));
    server.write_all(b"hello").await.unwrap();
    assert_eq!(
        &tokio::time::timeout(WAIT, writer).await.unwrap().unwrap(),
        b"hello"
    );

    let nobody = a.connect(&SocketAddr::new(ip(2), 1).to_string()).await;
    assert_eq!(
        nobody.err().unwrap().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    let addr = listener.local_addr();
    drop(listener);
    let gone = a.connect(&addr.to_string()).await;
    assert_eq!(
        gone.err().unwrap().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    assert!(a.connect("localhost:9092").await.is_err());
}

#[tokio::test]
async fn a_cut_link_holds_bytes_back_until_it_heals_and_loses_none() {
    let net = MemoryNetwork::new();
    let (a, b) = (net.host(ip(1)), net.host(ip(2)));
    let mut listener = b
        .listen(&SocketAddr::new(ip(2), 0).to_string())
        .await
        .unwrap();
    let (mut client, mut server, _) = pair(&a, &mut listener).await;

    net.cut(ip(1), ip(2));
    // The write is accepted locally or waits; either way nothing reaches the other end.
    let sent = tokio::spawn(async move {
        client.write_all(b"during the partition").await.unwrap();
        client
    });
    let mut buf = [0u8; 20];
    assert!(tokio::time::timeout(STALL, server.read_exact(&mut buf))
        .await
        .is_err());
    // A new connection over the cut link does not get through either.
    let addr = listener.local_addr().to_string();
    let dial = tokio::spawn({
        let a = a.clone();
        async move { a.connect(&addr).await.map(|_| ()) }
    });
    tokio::time::sleep(STALL).await;
    assert!(!dial.is_finished());

    net.heal(ip(1), ip(2));
    tokio::time::timeout(WAIT, server.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"during the partition");
    let _client = tokio::time::timeout(WAIT, sent).await.unwrap().unwrap();
    tokio::time::timeout(WAIT, dial)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn isolating_a_host_cuts_it_from_every_other_but_not_from_itself() {
    let net = MemoryNetwork::new();
    let (a, b, c) = (net.host(ip(1)), net.host(ip(2)), net.host(ip(3)));
    let mut on_a = a
        .listen(&SocketAddr::new(ip(1), 0).to_string())
        .await
        .unwrap();
    let mut on_b = b
        .listen(&SocketAddr::new(ip(2), 0).to_string())
        .await
        .unwrap();
    net.isolate(ip(1));

    let to_a = on_a.local_addr().to_string();
    let blocked = tokio::time::timeout(STALL, c.connect(&to_a)).await;
    assert!(blocked.is_err(), "c reached an isolated host");
    // b and c still talk, and a still reaches itself.
    let (mut from_c, mut at_b, _) = pair(&c, &mut on_b).await;
    from_c.write_all(b"x").await.unwrap();
    let mut one = [0u8; 1];
    tokio::time::timeout(WAIT, at_b.read_exact(&mut one))
        .await
        .unwrap()
        .unwrap();
    let (_self_client, _self_server, _) = pair(&a, &mut on_a).await;

    net.heal_all();
    let (_c_to_a, _a_from_c, from) = pair(&c, &mut on_a).await;
    assert_eq!(from.ip(), ip(3));
}

#[tokio::test]
async fn the_tcp_transport_speaks_to_itself_over_loopback() {
    let tcp = TcpTransport;
    let mut listener = tcp.listen("127.0.0.1:0").await.unwrap();
    let (mut client, server, _) = pair(&tcp, &mut listener).await;
    let mut server = server.into_tcp().ok().unwrap();
    client.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    tokio::time::timeout(WAIT, server.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"ping");
}
