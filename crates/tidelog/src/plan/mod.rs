//! `tidelog plan`: the seed's back-of-envelope sizing as a command. Assumptions are
//! flags whose defaults are the seed's; [`model`] turns them into figures (pure),
//! [`render`] prints them as the seed lays them out, or as JSON.

mod assumptions;
mod bootstrap;
mod consumers;
mod durability;
pub(crate) mod format;
mod model;
mod observe;
mod parse;
mod render;
mod sheet;
#[cfg(test)]
mod tests;

use std::io::Write as _;

use model::Assumptions;

/// Capacity plan from stated assumptions: storage, network fan-out, brokers, partitions,
/// batching, duplicates, drain time, truncation, producer buffer, dedup window.
///
/// Durations take ms, s, m, h, d or w (a bare number is seconds); sizes take decimal
/// (kB, MB, GB) or binary (KiB, MiB, GiB) units; fractions take 0.6 or 60%.
#[derive(clap::Args, Debug)]
pub(crate) struct PlanArgs {
    /// Peak offered load, messages per second.
    #[arg(long, default_value = "1000000", value_parser = parse::number)]
    rate: f64,
    /// Payload bytes per message (decimal: an estimate).
    #[arg(long, default_value = "1000", value_parser = parse::bytes)]
    message_bytes: f64,
    /// Copies of every record.
    #[arg(long, default_value_t = 3)]
    replication_factor: u32,
    /// How long records are kept, e.g. 7d or 36h.
    #[arg(long, default_value = "7d", value_parser = parse::duration_seconds)]
    retention: f64,
    /// Independent consumer groups reading the whole stream.
    #[arg(long, default_value_t = 3)]
    groups: u32,
    /// NIC speed per broker, gigabits per second (1 Gbps = 125,000,000 bytes/s).
    #[arg(long, default_value = "1", value_parser = parse::number)]
    nic_gbps: f64,
    /// Share of the NIC (and of disk bandwidth) for the steady path; the rest is for
    /// catch-up reads and rebalance bursts.
    #[arg(long, default_value = "60%", value_parser = parse::fraction)]
    nic_budget: f64,
    /// The other end of the NIC range, for the sensitivity line.
    #[arg(long, default_value = "10", value_parser = parse::number)]
    compare_nic_gbps: f64,
    /// Sequential write bandwidth of one broker's disk, bytes per second.
    #[arg(long, default_value = "1GB", value_parser = parse::bytes)]
    disk_sequential: f64,
    /// RAM per broker left to the page cache.
    #[arg(long, default_value = "100GB", value_parser = parse::bytes)]
    page_cache: f64,
    /// Open files per partition replica (segment, .index, .timeindex).
    #[arg(long, default_value_t = 3)]
    files_per_replica: u32,
    /// Processing time per message in one consumer, milliseconds.
    #[arg(long, default_value = "10", value_parser = parse::number)]
    consumer_ms: f64,
    /// Consumer capacity provisioned above offered load (20% = 1.2x).
    #[arg(long, default_value = "20%", value_parser = parse::fraction)]
    headroom: f64,
    /// A second headroom for the drain-time comparison.
    #[arg(long, default_value = "5%", value_parser = parse::fraction)]
    compare_headroom: f64,
    /// Producer processes sharing the load.
    #[arg(long, default_value_t = 1_000)]
    producers: u32,
    /// Producer batch.size (a configuration value: binary units).
    #[arg(long, default_value = "16KiB", value_parser = parse::bytes)]
    batch_size: f64,
    /// Per-record header on disk: offset 8 + length 4 + CRC 4 + timestamp 8.
    #[arg(long, default_value = "24", value_parser = parse::bytes)]
    record_overhead: f64,
    /// Consumer offset commit interval.
    #[arg(long, default_value = "5s", value_parser = parse::duration_seconds)]
    commit_interval: f64,
    /// Restarts (deploys, OOM kills, rebalances) per consumer per day.
    #[arg(long, default_value = "1", value_parser = parse::number)]
    restarts_per_day: f64,
    /// Partitions of __consumer_offsets.
    #[arg(long, default_value_t = 50)]
    offsets_partitions: u32,
    /// Length of the consumer stall whose backlog must drain.
    #[arg(long, default_value = "30s", value_parser = parse::duration_seconds)]
    stall: f64,
    /// Consumer max.poll.records.
    #[arg(long, default_value_t = 500)]
    max_poll_records: u32,
    /// Consumer max.poll.interval.ms.
    #[arg(long, default_value = "300s", value_parser = parse::duration_seconds)]
    max_poll_interval: f64,
    /// replica.lag.time.max.ms: how far behind a replica outside the ISR is, at least.
    #[arg(long, default_value = "30s", value_parser = parse::duration_seconds)]
    replica_lag_max: f64,
    /// Follower fetch lag under load (data on the leader only, at acks=1).
    #[arg(long, default_value = "10ms", value_parser = parse::duration_seconds)]
    follower_lag: f64,
    /// Producer buffer.memory (a configuration value: binary units).
    #[arg(long, default_value = "32MiB", value_parser = parse::bytes)]
    buffer_memory: f64,
    /// Consumer session timeout (first half of the redelivery horizon).
    #[arg(long, default_value = "45s", value_parser = parse::duration_seconds)]
    session_timeout: f64,
    /// Time a rebalance takes (second half of the redelivery horizon).
    #[arg(long, default_value = "15s", value_parser = parse::duration_seconds)]
    rebalance_time: f64,
    /// Bytes per dedup key in the idempotent consumer's table.
    #[arg(long, default_value = "16", value_parser = parse::bytes)]
    dedup_key_bytes: f64,
    /// Observe a running cluster at HOST:PORT and plan from its append rate, message
    /// size, replication factor and retention instead of those four assumptions.
    #[arg(long, value_name = "HOST:PORT")]
    bootstrap: Option<String>,
    /// How long --bootstrap watches the cluster's end offsets.
    #[arg(long, default_value = "10s", value_parser = parse::duration_seconds)]
    sample: f64,
    /// Print one JSON object with every figure instead of text.
    #[arg(long)]
    json: bool,
}

impl PlanArgs {
    fn assumptions(&self) -> Assumptions {
        Assumptions {
            rate: self.rate,
            message_bytes: self.message_bytes,
            replication_factor: self.replication_factor,
            retention_seconds: self.retention,
            consumer_groups: self.groups,
            nic_gbps: self.nic_gbps,
            nic_budget: self.nic_budget,
            compare_nic_gbps: self.compare_nic_gbps,
            disk_sequential_bytes_per_sec: self.disk_sequential,
            page_cache_bytes: self.page_cache,
            files_per_replica: self.files_per_replica,
            consumer_ms: self.consumer_ms,
            headroom: self.headroom,
            compare_headroom: self.compare_headroom,
            producers: self.producers,
            batch_bytes: self.batch_size,
            record_overhead_bytes: self.record_overhead,
            commit_interval_seconds: self.commit_interval,
            restarts_per_consumer_per_day: self.restarts_per_day,
            offsets_partitions: self.offsets_partitions,
            stall_seconds: self.stall,
            max_poll_records: self.max_poll_records,
            max_poll_interval_seconds: self.max_poll_interval,
            replica_lag_max_seconds: self.replica_lag_max,
            follower_fetch_lag_seconds: self.follower_lag,
            buffer_memory_bytes: self.buffer_memory,
            session_timeout_seconds: self.session_timeout,
            rebalance_seconds: self.rebalance_time,
            dedup_key_bytes: self.dedup_key_bytes,
        }
    }
}

pub(crate) fn run(args: PlanArgs) -> anyhow::Result<()> {
    let (assumptions, observed, notes) = match &args.bootstrap {
        Some(bootstrap) => {
            let window = std::time::Duration::try_from_secs_f64(args.sample)
                .map_err(|_| anyhow::anyhow!("--sample {} is not a usable window", args.sample))?;
            if window.is_zero() {
                anyhow::bail!("--sample must be longer than zero");
            }
            let observed = bootstrap::observe(bootstrap, window)?;
            let (assumptions, notes) = observe::apply(&observed, &args.assumptions())?;
            (assumptions, Some(observed), notes)
        }
        None => (args.assumptions(), None, Vec::new()),
    };
    let plan = model::plan(&assumptions)?;
    let output = if args.json {
        let json = render::json(&assumptions, &plan, observed.as_ref(), &notes);
        let mut json = serde_json::to_string_pretty(&json)?;
        json.push('\n');
        json
    } else {
        render::text(&assumptions, &plan, &notes)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // `tidelog plan | head` closing the pipe early is not an error.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
