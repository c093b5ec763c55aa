//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "tidelog-bench",
    about = "Benchmarks a Kafka-compatible broker (librdkafka load) against this machine's ceilings"
)]
pub(crate) struct Args {
    /// Broker to load (ignored with --spawn).
    #[arg(long, global = true, default_value = "127.0.0.1:9092")]
    pub(crate) bootstrap: String,
    /// Start `tidelog serve` with a temporary data dir, pinned to CPU 0 (load on CPU 1).
    #[arg(long, global = true)]
    pub(crate) spawn: bool,
    /// The `tidelog` binary for --spawn (default: TIDELOG_BIN, else beside this binary).
    #[arg(long, global = true)]
    pub(crate) tidelog_bin: Option<PathBuf>,
    /// Extra broker setting for --spawn, `name=value`; repeatable.
    #[arg(long = "broker-set", global = true, value_name = "NAME=VALUE")]
    pub(crate) broker_set: Vec<String>,
    /// Open-file limit for spawned brokers (`prlimit --nofile`); default: inherited.
    #[arg(long, global = true)]
    pub(crate) broker_nofile: Option<u64>,
    /// Directory for spawned data dirs and disk ceilings (default: the system temp dir).
    #[arg(long, global = true)]
    pub(crate) work_dir: Option<PathBuf>,
    /// Do not pin broker and load to separate CPUs.
    #[arg(long, global = true)]
    pub(crate) no_pin: bool,
    /// Measure the ceilings briefly (less accurate; for smoke runs).
    #[arg(long, global = true)]
    pub(crate) quick_ceilings: bool,
    /// Write the figures as a JSON array here.
    #[arg(long, global = true)]
    pub(crate) json: Option<PathBuf>,
    /// Write a latency-percentile plot here (for workloads that measure latency).
    #[arg(long, global = true)]
    pub(crate) svg: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Only the machine's ceilings: loopback TCP, round trip, disk write, fdatasync.
    Ceilings,
    /// Produce fixed-size records as fast as possible.
    Produce(ProduceArgs),
    /// Fill a topic, then read it from the beginning (page-cache resident).
    Consume(ConsumeArgs),
    /// End-to-end latency at a fixed rate.
    E2e(E2eArgs),
    /// Produce one small record at a time: request latency.
    Ping(PingArgs),
    /// OpenMessaging Benchmark workload presets.
    Omb(OmbArgs),
    /// The targets table (T1–T11) with verdicts.
    Targets(TargetsArgs),
    /// Produce and consume over an SSL listener and the PLAINTEXT one of the same
    /// broker, interleaved: TLS as a ratio of plaintext (needs --spawn).
    Tls(TlsArgs),
    /// A group of N members absorbing one more: classic eager, cooperative, KIP-848.
    Rebalance(RebalanceArgs),
    /// More consumers than partitions: a share group (KIP-932) against a classic group.
    Share(ShareArgs),
    /// The same workloads against several brokers in one run, interleaved: each
    /// system's median / min / max and the baseline's ratio to each peer.
    Compare(CompareArgs),
}

/// A workload of `compare`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareWorkload {
    /// Produce as fast as possible to 1 partition (MB/s).
    #[value(name = "produce1")]
    Produce1,
    /// Produce as fast as possible to 16 partitions (MB/s).
    #[value(name = "produce16")]
    Produce16,
    /// Fill 4 partitions, then read them from the beginning (MB/s).
    Consume,
    /// Produce at a fixed rate, consume as it comes: ack and end-to-end latency.
    AckLatency,
    /// One 100 B produce in flight at a time: request latency.
    Ping,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CompareArgs {
    /// A system to compare, `NAME=HOST:PORT` (its bootstrap address); repeatable.
    #[arg(long = "broker", value_name = "NAME=HOST:PORT")]
    pub(crate) brokers: Vec<String>,
    /// Also start a tidelog on ephemeral ports (temporary data dir, CPU 0) under this
    /// name, "tidelog" when none is given; repeatable. Spawned systems come first.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "tidelog")]
    pub(crate) spawn_tidelog: Vec<String>,
    /// The system whose ratio to each other one is reported (default: the first).
    #[arg(long)]
    pub(crate) baseline: Option<String>,
    /// Runs of every workload on every system; the order of the systems alternates.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "produce1,produce16,consume,ack-latency,ping"
    )]
    pub(crate) workloads: Vec<CompareWorkload>,
    /// small: about a minute per system and run; tiny: seconds (CI; figures meaningless).
    #[arg(long, value_enum, default_value = "small")]
    pub(crate) scale: ScaleName,
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    /// The fixed rate of `ack-latency`, records/s.
    #[arg(long, default_value_t = 5_000.0)]
    pub(crate) rate: f64,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ShareArgs {
    /// Consumers in each group.
    #[arg(long, default_value_t = 32)]
    pub(crate) consumers: usize,
    #[arg(long, default_value_t = 4)]
    pub(crate) partitions: i32,
    /// Records produced once, then read by each group in full.
    #[arg(long, default_value_t = 200_000)]
    pub(crate) records: u64,
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    /// Runs of each group kind, interleaved; the table reports medians.
    #[arg(long, default_value_t = 1)]
    pub(crate) runs: usize,
    /// The longest one group may take to read everything.
    #[arg(long, default_value_t = 300.0)]
    pub(crate) timeout_secs: f64,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct TlsArgs {
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    /// Records produced (then consumed) per protocol per run.
    #[arg(long, default_value_t = 300_000)]
    pub(crate) count: u64,
    #[arg(long, default_value_t = 4)]
    pub(crate) partitions: i32,
    /// Runs of each protocol, interleaved (the order alternates); medians are reported.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RebalanceArgs {
    /// Members before the new one joins.
    #[arg(long, default_value_t = 100)]
    pub(crate) members: usize,
    /// Partitions of the group's topic (at least members + 1).
    #[arg(long, default_value_t = 400)]
    pub(crate) partitions: i32,
    /// Runs of each protocol, interleaved; the table reports medians.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Heartbeat interval of every protocol (classic members' `heartbeat.interval.ms`;
    /// with --spawn also the broker's `group.consumer.heartbeat.interval.ms`).
    #[arg(long, default_value_t = 3000)]
    pub(crate) heartbeat_ms: u64,
    /// How long each member's revoke callback takes (the application's commit and
    /// flush before it gives partitions up).
    #[arg(long, default_value_t = 0)]
    pub(crate) revoke_ms: u64,
    /// The longest a group may take to settle.
    #[arg(long, default_value_t = 180.0)]
    pub(crate) timeout_secs: f64,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ProduceArgs {
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    /// Records in total (across producers).
    #[arg(long, default_value_t = 200_000)]
    pub(crate) count: u64,
    /// Stop after this many seconds even if --count is not reached.
    #[arg(long)]
    pub(crate) duration_secs: Option<f64>,
    #[arg(long, default_value_t = 4)]
    pub(crate) partitions: i32,
    /// Copies of each partition of the created topic (a cluster given with --bootstrap).
    #[arg(long, default_value_t = 1)]
    pub(crate) replication_factor: i32,
    #[arg(long, default_value = "1")]
    pub(crate) acks: String,
    #[arg(long, default_value_t = 5)]
    pub(crate) linger_ms: u32,
    #[arg(long, default_value_t = 262_144)]
    pub(crate) batch_size: usize,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub(crate) compression: String,
    #[arg(long)]
    pub(crate) keyed: bool,
    #[arg(long, default_value_t = 1)]
    pub(crate) producers: usize,
    /// Wait for each record's acknowledgement before sending the next.
    #[arg(long)]
    pub(crate) one_in_flight: bool,
    /// Topic-level config for the created topic, `name=value`; repeatable.
    #[arg(long = "topic-config", value_name = "NAME=VALUE")]
    pub(crate) topic_config: Vec<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ConsumeArgs {
    /// Read this existing topic instead of filling a new one.
    #[arg(long)]
    pub(crate) topic: Option<String>,
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    #[arg(long, default_value_t = 200_000)]
    pub(crate) count: u64,
    #[arg(long, default_value_t = 4)]
    pub(crate) partitions: i32,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct E2eArgs {
    /// Records per second.
    #[arg(long, default_value_t = 1_000.0)]
    pub(crate) rate: f64,
    #[arg(long, default_value_t = 10.0)]
    pub(crate) duration_secs: f64,
    #[arg(long, default_value_t = 1)]
    pub(crate) partitions: i32,
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_size: usize,
    #[arg(long, default_value = "1")]
    pub(crate) acks: String,
    #[arg(long, default_value_t = 0)]
    pub(crate) linger_ms: u32,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PingArgs {
    #[arg(long, default_value_t = 2_000)]
    pub(crate) count: u64,
    #[arg(long, default_value_t = 100)]
    pub(crate) record_size: usize,
    #[arg(long, default_value = "1")]
    pub(crate) acks: String,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum OmbPreset {
    /// 1 topic, 16 partitions, 1 KiB records, 50,000 msg/s.
    #[value(name = "1-topic-16-partitions-1kb")]
    Topic16Partitions1kb,
    /// 1 topic, 100 partitions, 1 KiB records, 50,000 msg/s.
    #[value(name = "1-topic-100-partitions-1kb")]
    Topic100Partitions1kb,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct OmbArgs {
    #[arg(value_enum)]
    pub(crate) preset: OmbPreset,
    /// Override the preset's rate (msg/s).
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    #[arg(long, default_value_t = 30.0)]
    pub(crate) duration_secs: f64,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub(crate) enum ScaleName {
    /// A few minutes; what docs/performance.md reports.
    Small,
    /// Seconds; proves the tool runs (CI), figures meaningless.
    Tiny,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct TargetsArgs {
    #[arg(long, value_enum, default_value = "small")]
    pub(crate) scale: ScaleName,
    /// Runs per target (the table reports medians); default from the scale.
    #[arg(long)]
    pub(crate) runs: Option<usize>,
    /// Run only these targets: ids, or ids without their letter (`T3` = T3a, T3b;
    /// `T1` is not T10), e.g. `T1,T10`.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Bytes of data for T9's restart (default from the scale).
    #[arg(long)]
    pub(crate) t9_bytes: Option<u64>,
    /// Partitions of T11a–e's topic; T11f–j use three times as many (default from
    /// the scale: 16,384 and 49,152).
    #[arg(long)]
    pub(crate) t11_partitions: Option<i32>,
}
