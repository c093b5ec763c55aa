//! The native client against a test node: a connected client, and topic creation.

use tidelog_client::{Client, NewTopic};

use super::Node;

/// A client connected to the node's Kafka listener.
pub async fn client(node: &Node) -> Client {
    Client::connect_to(&node.kafka.to_string()).await.unwrap()
}

/// Creates `topic` with `partitions` partitions on the node (replication factor 1).
pub async fn create_topic(node: &Node, topic: &str, partitions: i32) {
    client(node)
        .await
        .create_topic(&NewTopic {
            name: topic.into(),
            partitions,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
}
