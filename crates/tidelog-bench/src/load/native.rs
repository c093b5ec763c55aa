//! What the native reference loads (`native_produce`, `native_consume`) share: finding
//! the broker to talk to with the workspace's own client.

use tidelog_client::Client;

/// The leader of partition 0 of `topic` (its Kafka listener address), the partitions it
/// leads, and the topic's partition count.
pub(crate) fn leader_of_partition_zero(
    bootstrap: &str,
    topic: &str,
) -> anyhow::Result<(String, Vec<i32>, usize)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut client = Client::connect_to(bootstrap).await?;
        let meta = client.topic(topic, false).await?;
        let leader = client.leader_of(topic, 0).await?;
        let address = client.broker_connection(leader).await?.addr().to_string();
        let led = meta
            .partitions
            .iter()
            .filter(|p| p.leader == leader)
            .map(|p| p.partition)
            .collect();
        Ok((address, led, meta.partitions.len()))
    })
}
