//! Hostile or mistaken input on the controller port never harms the voter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quorum_support;

use std::time::Duration;

use quorum_support::{topic, within, Cluster, Tuning};
use tidelog_controller::quorum::MetadataQuorum;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const STEP: Duration = Duration::from_secs(5);

async fn exchange(addr: std::net::SocketAddr, frame: &[u8]) -> Option<serde_json::Value> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(frame).await.unwrap();
    let mut len = [0u8; 4];
    match within(
        STEP,
        "the server's answer or close",
        stream.read_exact(&mut len),
    )
    .await
    {
        Ok(_) => {}
        Err(_) => return None, // closed without an answer
    }
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.unwrap();
    Some(serde_json::from_slice(&body).unwrap())
}

fn frame(json: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(json).unwrap();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_are_dropped_and_other_clusters_refused() {
    let cluster = Cluster::start(1, Tuning::default()).await;
    let addr = cluster.addrs[&1];

    // A declared length of 4 GiB: closed without allocating or answering.
    assert!(exchange(addr, &[0xff, 0xff, 0xff, 0xff, b'{'])
        .await
        .is_none());
    // A zero length and undecodable JSON: closed.
    assert!(exchange(addr, &[0, 0, 0, 0]).await.is_none());
    assert!(exchange(addr, &[0, 0, 0, 3, b'{', b'{', b'{'])
        .await
        .is_none());

    // A well-formed vote request from another cluster is refused, not counted.
    let vote = serde_json::json!({
        "cluster_id": "someone-else",
        "from": 9,
        "request": {"Vote": {
            "vote": {"leader_id": {"term": 99, "node_id": 9}, "committed": false},
            "last_log_id": null
        }}
    });
    let answer = exchange(addr, &frame(&vote)).await.expect("an answer");
    let refusal = answer["Refused"].as_str().expect("a refusal");
    assert!(refusal.contains("someone-else"), "{refusal}");
    let s = cluster.node(1).quorum.status();
    assert!(
        s.term < 99,
        "the foreign vote must not raise the term: {s:?}"
    );

    // A snapshot chunk claiming to end beyond the snapshot limit is refused before
    // anything is buffered.
    let cluster_id = cluster.peers.derived_cluster_id();
    let status = cluster.node(1).quorum.status();
    let chunk = serde_json::json!({
        "cluster_id": cluster_id,
        "from": 2,
        "request": {"InstallSnapshot": {
            "vote": {"leader_id": {"term": status.term, "node_id": 1}, "committed": true},
            "meta": {"last_log_id": null,
                     "last_membership": {"log_id": null, "membership": {"configs": [], "nodes": {}}},
                     "snapshot_id": "x"},
            "offset": 1u64 << 40,
            "data": [1, 2, 3],
            "done": false
        }}
    });
    let answer = exchange(addr, &frame(&chunk)).await.expect("an answer");
    let refusal = answer["Refused"].as_str().expect("a refusal");
    assert!(refusal.contains("beyond the limit"), "{refusal}");

    // The voter still works.
    cluster
        .node(1)
        .controller
        .create_topic(topic("still-fine"), false)
        .await
        .unwrap();
}
