//! The assumptions a plan is computed from, with the seed's values as defaults, and
//! the checks that keep the arithmetic finite and meaningful.

use serde::Serialize;

use super::model::DAY;

/// Every assumption the arithmetic needs. `Default` is the seed's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Assumptions {
    /// Peak offered load, messages per second.
    pub(crate) rate: f64,
    pub(crate) message_bytes: f64,
    pub(crate) replication_factor: u32,
    pub(crate) retention_seconds: f64,
    pub(crate) consumer_groups: u32,
    pub(crate) nic_gbps: f64,
    /// Share of the NIC (and of disk bandwidth) the steady path may use.
    pub(crate) nic_budget: f64,
    /// The other end of the NIC range, for the sensitivity line.
    pub(crate) compare_nic_gbps: f64,
    pub(crate) disk_sequential_bytes_per_sec: f64,
    pub(crate) page_cache_bytes: f64,
    pub(crate) files_per_replica: u32,
    /// Processing time per message in one consumer, milliseconds.
    pub(crate) consumer_ms: f64,
    /// Spare consumer capacity above offered load (0.2 = provision 1.2x).
    pub(crate) headroom: f64,
    pub(crate) compare_headroom: f64,
    pub(crate) producers: u32,
    pub(crate) batch_bytes: f64,
    pub(crate) record_overhead_bytes: f64,
    pub(crate) commit_interval_seconds: f64,
    pub(crate) restarts_per_consumer_per_day: f64,
    pub(crate) offsets_partitions: u32,
    pub(crate) stall_seconds: f64,
    pub(crate) max_poll_records: u32,
    pub(crate) max_poll_interval_seconds: f64,
    pub(crate) replica_lag_max_seconds: f64,
    pub(crate) follower_fetch_lag_seconds: f64,
    pub(crate) buffer_memory_bytes: f64,
    pub(crate) session_timeout_seconds: f64,
    pub(crate) rebalance_seconds: f64,
    pub(crate) dedup_key_bytes: f64,
}

impl Default for Assumptions {
    fn default() -> Self {
        Self {
            rate: 1_000_000.0,
            message_bytes: 1_000.0,
            replication_factor: 3,
            retention_seconds: 7.0 * 86_400.0,
            consumer_groups: 3,
            nic_gbps: 1.0,
            nic_budget: 0.60,
            compare_nic_gbps: 10.0,
            disk_sequential_bytes_per_sec: 1e9,
            page_cache_bytes: 100e9,
            files_per_replica: 3,
            consumer_ms: 10.0,
            headroom: 0.20,
            compare_headroom: 0.05,
            producers: 1_000,
            batch_bytes: 16_384.0,
            record_overhead_bytes: 24.0,
            commit_interval_seconds: 5.0,
            restarts_per_consumer_per_day: 1.0,
            offsets_partitions: 50,
            stall_seconds: 30.0,
            max_poll_records: 500,
            max_poll_interval_seconds: 300.0,
            replica_lag_max_seconds: 30.0,
            follower_fetch_lag_seconds: 0.010,
            buffer_memory_bytes: 33_554_432.0,
            session_timeout_seconds: 45.0,
            rebalance_seconds: 15.0,
            dedup_key_bytes: 16.0,
        }
    }
}

pub(crate) fn validate(a: &Assumptions) -> anyhow::Result<()> {
    let positive = [
        ("--rate", a.rate),
        ("--message-bytes", a.message_bytes),
        ("--retention", a.retention_seconds),
        ("--nic-gbps", a.nic_gbps),
        ("--nic-budget", a.nic_budget),
        ("--compare-nic-gbps", a.compare_nic_gbps),
        ("--disk-sequential", a.disk_sequential_bytes_per_sec),
        ("--consumer-ms", a.consumer_ms),
        ("--batch-size", a.batch_bytes),
        ("--commit-interval", a.commit_interval_seconds),
        ("--max-poll-interval", a.max_poll_interval_seconds),
    ];
    for (flag, value) in positive {
        if !(value.is_finite() && value > 0.0) {
            anyhow::bail!("{flag} must be greater than zero");
        }
    }
    let limits = [
        ("--rate", a.rate, 1e12),
        ("--message-bytes", a.message_bytes, 1e9),
        ("--retention", a.retention_seconds, 100.0 * 365.0 * DAY),
    ];
    for (flag, value, limit) in limits {
        if value > limit {
            anyhow::bail!("{flag} is implausibly large ({value} > {limit})");
        }
    }
    if !(1..=32).contains(&a.replication_factor) {
        anyhow::bail!("--replication-factor must be between 1 and 32");
    }
    if a.producers == 0 {
        anyhow::bail!("--producers must be at least 1");
    }
    if a.offsets_partitions == 0 {
        anyhow::bail!("--offsets-partitions must be at least 1");
    }
    if a.batch_bytes < a.message_bytes + a.record_overhead_bytes {
        anyhow::bail!(
            "--batch-size ({} bytes) is smaller than one record ({} + {} bytes)",
            a.batch_bytes,
            a.record_overhead_bytes,
            a.message_bytes
        );
    }
    Ok(())
}
