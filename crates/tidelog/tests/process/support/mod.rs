//! A real `tidelog serve` process on ephemeral loopback ports with a temp data dir,
//! and a minimal raw Kafka-protocol connection to talk to it.
#![allow(dead_code, unreachable_pub, clippy::expect_used, clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

pub mod cli_run;
pub mod cluster;
pub mod cluster_calls;
pub mod native;
pub mod postgres;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local addr").port()
}

pub struct Node {
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    child: Option<Child>,
    extra: Vec<String>,
}

impl Node {
    /// Starts a node with `--set` settings and waits until /readyz answers 200.
    pub fn start(settings: &[&str]) -> Node {
        Node::start_prepared(settings, |_| {})
    }

    /// Like [`Node::start`], on a data directory `prepare` filled first (e.g. with
    /// partition directories an earlier run or release left).
    pub fn start_prepared(settings: &[&str], prepare: impl FnOnce(&std::path::Path)) -> Node {
        let temp = tempfile::tempdir().expect("temp dir");
        let data_dir = temp.path().join("data");
        std::fs::create_dir_all(&data_dir).expect("data dir");
        prepare(&data_dir);
        let mut node = Node {
            kafka: SocketAddr::from(([127, 0, 0, 1], free_port())),
            admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            data_dir,
            _temp: Some(temp),
            child: None,
            extra: settings.iter().map(|s| s.to_string()).collect(),
        };
        // A port found free can be taken (by another test's outgoing connection) before
        // tidelog binds it; the first start then exits, and another pair of ports is tried.
        for _ in 0..4 {
            match node.try_spawn() {
                Ok(()) => return node,
                Err(e) => eprintln!("{e}; retrying on other ports"),
            }
            node.kafka = SocketAddr::from(([127, 0, 0, 1], free_port()));
            node.admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        }
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            panic!("{e}");
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidelog"));
        cmd.arg("serve")
            .arg("--listen")
            .arg(self.kafka.to_string())
            .arg("--admin-listen")
            .arg(self.admin.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .env("TIDELOG_LOG", "warn")
            .stdin(Stdio::null());
        for s in &self.extra {
            cmd.arg("--set").arg(s);
        }
        self.child = Some(cmd.spawn().expect("spawn tidelog"));
        self.wait_ready(Duration::from_secs(30))
    }

    /// Waits for /readyz; an exit during start-up is an error, not becoming ready in
    /// `timeout` fails the test.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("tidelog exited during start-up: {status}"));
                }
            }
            if http_status(self.admin, "/readyz") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tidelog not ready within {timeout:?}");
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for the clean exit; returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Sends a signal (`STOP`, `CONT`) to the node: a stopped node keeps its sockets, so
    /// clients connect and send but get no answer.
    pub fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status();
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// GET over HTTP/1.1; returns (status, content type, body).
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("http head");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    (status, content_type, body.to_string())
}

/// The status code of a GET on the admin port, if it answered.
pub fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace().nth(1)?.parse().ok()
}

/// One raw Kafka-protocol connection.
pub struct Conn {
    stream: TcpStream,
    correlation: i32,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> Conn {
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
            .await
            .expect("connect timeout")
            .expect("connect");
        Conn {
            stream,
            correlation: 0,
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// The next frame, or None if the broker closed the connection.
    pub async fn read_raw(&mut self) -> Option<Bytes> {
        let frame = tokio::time::timeout(
            Duration::from_secs(30),
            tidelog_protocol::frame::read_frame(&mut self.stream, 64 << 20),
        )
        .await
        .expect("response timeout");
        frame.ok().flatten().map(|f| f.freeze())
    }

    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        self.correlation += 1;
        let bytes = tidelog_protocol::client::encode_request(
            key,
            version,
            self.correlation,
            Some("test"),
            req,
        )
        .expect("encode");
        self.send_raw(&bytes).await;
        let frame = self.read_raw().await.expect("connection closed");
        let (correlation, resp) =
            tidelog_protocol::client::decode_response::<Resp>(frame, key, version).expect("decode");
        assert_eq!(correlation, self.correlation);
        resp
    }
}
