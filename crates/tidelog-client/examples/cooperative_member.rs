//! One cooperative-sticky member of a classic group: prints each change of its
//! assignment and each record it reads, for the given seconds, then closes (committing
//! and leaving). Used by `tests/compat/test_native_cooperative_group.py` next to
//! librdkafka members.
//!
//! ```text
//! cargo run --release -p tidelog-client --example cooperative_member -- 127.0.0.1:9092 orders billing 30
//! # assigned orders-0 orders-2
//! # record orders-0 17
//! ```
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::time::{Duration, Instant};

use tidelog_client::{
    AssignmentStrategy, Client, Consumer, ConsumerConfig, OffsetReset, RebalanceListener,
    TopicPartition,
};

struct Printer;

fn names(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect();
    names.join(" ")
}

impl RebalanceListener for Printer {
    fn on_revoked(&mut self, partitions: &[TopicPartition]) {
        println!("revoked {}", names(partitions));
    }
    fn on_assigned(&mut self, partitions: &[TopicPartition]) {
        println!("assigned {}", names(partitions));
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, topic, group, seconds] = args.as_slice() else {
        return Err("usage: cooperative_member BOOTSTRAP TOPIC GROUP SECONDS".into());
    };
    let run_for = Duration::from_secs(seconds.parse()?);
    let mut config = ConsumerConfig::for_group(group);
    config.auto_offset_reset = OffsetReset::Earliest;
    config.session_timeout = Duration::from_secs(10);
    config.heartbeat_interval = Duration::from_millis(500);
    config.assignment_strategies = vec![AssignmentStrategy::CooperativeSticky];
    let mut consumer = Consumer::new(Client::connect_to(bootstrap).await?, config)?;
    consumer.set_rebalance_listener(Box::new(Printer));
    consumer.subscribe(&[topic.as_str()])?;
    let started = Instant::now();
    while started.elapsed() < run_for {
        for r in consumer.poll(Duration::from_millis(200)).await? {
            println!("record {}-{} {}", r.topic, r.partition, r.offset);
        }
        std::io::stdout().flush()?;
    }
    consumer.close().await?;
    Ok(())
}
