//! Runs one command: ceilings first (before pinning, so the loopback pair may use both
//! CPUs), then the broker (`--spawn`, CPU 0) and the load (this process, CPU 1).

use std::time::Duration;

use anyhow::{anyhow, Context};

use crate::broker::{self, SpawnOptions, SpawnedBroker};
use crate::ceilings::{self, CeilingSizes, Ceilings};
use crate::cli::{Args, Command, OmbPreset, ScaleName};
use crate::load::{self, admin, consume, e2e, produce, rebalance, share};
use crate::report::{self, Figure};
use crate::stats::LatencySummary;
use crate::targets::{self, Scale};
use crate::tls_cost;

type Curves = Vec<(String, LatencySummary)>;

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if matches!(args.command, Command::Compare(_)) && args.spawn {
        return Err(anyhow!(
            "compare starts tidelogs with --spawn-tidelog [NAME]; --spawn is for one-broker commands"
        ));
    }
    let work_root = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&work_root)
        .with_context(|| format!("creating {}", work_root.display()))?;
    let tiny = matches!(&args.command, Command::Targets(t) if matches!(t.scale, ScaleName::Tiny))
        || matches!(&args.command, Command::Compare(c) if matches!(c.scale, ScaleName::Tiny));
    let sizes = if args.quick_ceilings || tiny {
        CeilingSizes::quick()
    } else {
        CeilingSizes::full()
    };
    eprintln!("{}", machine_description());
    eprintln!("measuring ceilings (disk: {}) ...", work_root.display());
    let ceilings = ceilings::measure(&work_root, &sizes)?;
    eprint!("{}", report::table(&ceiling_figures(&ceilings)));
    if let Command::Compare(compare) = &args.command {
        // Its own brokers (several), its own report: one table per figure.
        return crate::compare::run(&args, compare, &ceilings, &work_root, machine_description());
    }

    let pin = !args.no_pin && broker::taskset_available();
    // The `tls` workload's CA and key store, kept until the run ends.
    let tls_files = match &args.command {
        Command::Tls(_) if args.spawn => Some(tls_cost::TlsFiles::make(&work_root)?),
        _ => None,
    };
    let spawn = if args.spawn {
        let binary = broker::locate_tidelog(args.tidelog_bin.as_deref()).ok_or_else(|| {
            anyhow!("--spawn: no tidelog binary (build it, or pass --tidelog-bin / TIDELOG_BIN)")
        })?;
        Some(SpawnOptions {
            binary,
            work_root: work_root.clone(),
            cpu: pin.then_some(0),
            settings: spawn_settings(&args),
            nofile: args.broker_nofile,
            ssl_keystore: tls_files.as_ref().map(|f| f.keystore.clone()),
        })
    } else {
        None
    };
    let broker = spawn.clone().map(SpawnedBroker::start).transpose()?;
    if pin && broker.is_some() {
        broker::pin_self(1)?;
    }
    let bootstrap = broker
        .as_ref()
        .map_or_else(|| args.bootstrap.clone(), SpawnedBroker::bootstrap);

    let (figures, curves) = match &args.command {
        Command::Ceilings => (ceiling_figures(&ceilings), Vec::new()),
        Command::Produce(p) => {
            let topic = load::fresh_topic("produce");
            let configs = parse_pairs(&p.topic_config)?;
            admin::create_topic(
                &bootstrap,
                &topic,
                p.partitions,
                p.replication_factor,
                &configs,
            )?;
            let spec = produce::ProduceSpec {
                bootstrap: bootstrap.clone(),
                topic,
                record_size: p.record_size,
                count: p.count,
                duration: p.duration_secs.map(Duration::from_secs_f64),
                acks: p.acks.clone(),
                linger_ms: p.linger_ms,
                batch_size: p.batch_size,
                compression: p.compression.clone(),
                keyed: p.keyed,
                producers: p.producers,
                one_in_flight: p.one_in_flight,
            };
            produce_figures(&spec, &ceilings, broker.as_ref())?
        }
        Command::Consume(c) => {
            let topic = match &c.topic {
                Some(topic) => topic.clone(),
                None => {
                    let topic = load::fresh_topic("consume");
                    admin::create_topic(&bootstrap, &topic, c.partitions, 1, &[])?;
                    let spec = targets::produce_spec(&bootstrap, &topic, c.record_size, c.count);
                    produce::run(&spec)?;
                    topic
                }
            };
            let result = consume::run(&bootstrap, &topic, Duration::from_secs(600))?;
            let figures = vec![
                Figure::new("consume", "consume from the beginning", result.mb_s, "MB/s")
                    .ceiling(ceilings.loopback_tcp_mb_s)
                    .note(format!(
                        "{} records in {:.2} s; ceiling: loopback TCP (C1)",
                        result.records, result.seconds
                    )),
                Figure::new(
                    "consume",
                    "consume from the beginning",
                    result.records_s,
                    "records/s",
                ),
            ];
            (figures, Vec::new())
        }
        Command::E2e(e) => {
            let topic = load::fresh_topic("e2e");
            admin::create_topic(&bootstrap, &topic, e.partitions, 1, &[])?;
            let spec = e2e::E2eSpec {
                bootstrap: bootstrap.clone(),
                topic,
                partitions: e.partitions,
                record_size: e.record_size,
                rate: e.rate,
                duration: Duration::from_secs_f64(e.duration_secs),
                warmup: Duration::from_secs_f64((e.duration_secs / 5.0).min(2.0)),
                acks: e.acks.clone(),
                linger_ms: e.linger_ms,
                sticky_ms: None,
            };
            e2e_figures("e2e", &spec, &ceilings)?
        }
        Command::Ping(p) => {
            let topic = load::fresh_topic("ping");
            admin::create_topic(&bootstrap, &topic, 1, 1, &[])?;
            let mut spec = targets::produce_spec(&bootstrap, &topic, p.record_size, p.count);
            spec.acks = p.acks.clone();
            spec.one_in_flight = true;
            spec.linger_ms = 0;
            produce_figures(&spec, &ceilings, broker.as_ref())?
        }
        Command::Omb(o) => {
            let (partitions, name) = match o.preset {
                OmbPreset::Topic16Partitions1kb => (16, "1-topic-16-partitions-1kb"),
                OmbPreset::Topic100Partitions1kb => (100, "1-topic-100-partitions-1kb"),
            };
            let spec = targets::omb_spec(
                &bootstrap,
                partitions,
                o.rate.unwrap_or(50_000.0),
                o.duration_secs,
            )?;
            e2e_figures(name, &spec, &ceilings)?
        }
        Command::Rebalance(r) => {
            let topic = load::fresh_topic("rebalance");
            admin::create_topic(&bootstrap, &topic, r.partitions, 1, &[])?;
            let spec = rebalance::RebalanceSpec {
                bootstrap: bootstrap.clone(),
                topic,
                partitions: r.partitions,
                members: r.members,
                heartbeat: Duration::from_millis(r.heartbeat_ms),
                on_revoke: Duration::from_millis(r.revoke_ms),
                timeout: Duration::from_secs_f64(r.timeout_secs),
            };
            (rebalance::figures(&spec, r.runs)?, Vec::new())
        }
        Command::Share(s) => {
            let topic = load::fresh_topic("share");
            admin::create_topic(&bootstrap, &topic, s.partitions, 1, &[])?;
            let fill = targets::produce_spec(&bootstrap, &topic, s.record_size, s.records);
            produce::run(&fill)?;
            let spec = share::ShareSpec {
                bootstrap: bootstrap.clone(),
                topic,
                consumers: s.consumers,
                records: s.records,
                timeout: Duration::from_secs_f64(s.timeout_secs),
            };
            (share::figures(&spec, s.runs)?, Vec::new())
        }
        Command::Tls(t) => {
            let (Some(broker), Some(files)) = (broker.as_ref(), tls_files.as_ref()) else {
                return Err(anyhow!(
                    "tls needs --spawn: it starts the broker with an SSL listener"
                ));
            };
            (tls_cost::figures(broker, files, t)?, Vec::new())
        }
        Command::Compare(_) => return Err(anyhow!("compare is run before the other commands")),
        Command::Targets(t) => {
            let mut scale = match t.scale {
                ScaleName::Small => Scale::small(),
                ScaleName::Tiny => Scale::tiny(),
            };
            if let Some(runs) = t.runs {
                scale.runs = runs;
            }
            if let Some(bytes) = t.t9_bytes {
                scale.t9_bytes = bytes;
            }
            if let Some(partitions) = t.t11_partitions {
                scale.t11_partitions = partitions;
                scale.t11_many_partitions = partitions.saturating_mul(3);
            }
            let target = targets::Target {
                bootstrap: bootstrap.clone(),
                broker: broker.as_ref(),
                spawn: spawn.clone(),
                only: t.only.clone(),
            };
            let outcome = targets::run(&target, &ceilings, &scale);
            (outcome.figures, outcome.curves)
        }
    };

    println!("{}", report::table(&figures));
    eprintln!("load average at the end: {}", load_average());
    if let Some(path) = &args.json {
        report::write_json(path, &figures)?;
    }
    if let Some(path) = &args.svg {
        let svg = crate::plot::latency_svg("tidelog-bench latency by percentile", &curves);
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn produce_figures(
    spec: &produce::ProduceSpec,
    c: &Ceilings,
    broker: Option<&SpawnedBroker>,
) -> anyhow::Result<(Vec<Figure>, Curves)> {
    let cpu_before = broker.and_then(SpawnedBroker::cpu_seconds);
    let result = produce::run(spec)?;
    let cpu_after = broker.and_then(SpawnedBroker::cpu_seconds);
    let name = format!(
        "produce {} B, acks={}, {} producer(s){}",
        spec.record_size,
        spec.acks,
        spec.producers,
        if spec.one_in_flight {
            ", one in flight"
        } else {
            ""
        }
    );
    let mut figures = vec![
        Figure::new("produce", &name, result.mb_s, "MB/s")
            .ceiling(c.loopback_tcp_mb_s.min(c.buffered_write_mb_s))
            .note(format!(
                "{} records in {:.2} s; ceiling: min(loopback TCP, buffered write)",
                result.records, result.seconds
            )),
        Figure::new("produce", &name, result.records_s, "records/s"),
    ];
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        figures.push(Figure::new(
            "broker-cpu",
            &name,
            (after - before) / (result.bytes as f64 / 1e9),
            "core-s/GB",
        ));
    }
    if let Some(rss) = broker.and_then(SpawnedBroker::rss_bytes) {
        figures.push(Figure::new("broker-rss", &name, rss as f64 / 1e6, "MB"));
    }
    let mut curves = Vec::new();
    for (id, value) in [
        ("librdkafka-rtt-p50", result.client_rtt_p50_us),
        ("librdkafka-rtt-p99", result.client_rtt_p99_us),
        ("librdkafka-queue-p99", result.client_queue_p99_us),
    ] {
        if let Some(value) = value {
            figures.push(Figure::new(id, &name, value, "µs").ceiling(c.loopback_rtt_us));
        }
    }
    if let Some(latency) = result.latency {
        figures.push(
            Figure::new("latency-p50", &name, latency.p50_us, "µs").ceiling(c.loopback_rtt_us),
        );
        figures.push(
            Figure::new("latency-p99", &name, latency.p99_us, "µs").ceiling(c.loopback_rtt_us),
        );
        figures.push(
            Figure::new("latency-max", &name, latency.max_us, "µs").ceiling(c.loopback_rtt_us),
        );
        curves.push((name, latency));
    }
    Ok((figures, curves))
}

fn e2e_figures(
    name: &str,
    spec: &e2e::E2eSpec,
    c: &Ceilings,
) -> anyhow::Result<(Vec<Figure>, Curves)> {
    let result = e2e::run(spec)?;
    let workload = format!(
        "{name}: {} partitions, {} B at {} msg/s",
        spec.partitions, spec.record_size, spec.rate
    );
    let l = &result.latency;
    let figures = vec![
        Figure::new("e2e-rate", &workload, result.achieved_rate, "msg/s").note(format!(
            "{} sent, {} received; librdkafka producer (Produce): {}; consumer (Fetch): {}",
            result.sent, result.received, result.producer, result.consumer
        )),
        Figure::new("e2e-p50", &workload, l.p50_us, "µs").ceiling(c.loopback_rtt_us),
        Figure::new("e2e-p99", &workload, l.p99_us, "µs").ceiling(c.loopback_rtt_us),
        Figure::new("e2e-p99.9", &workload, l.p999_us, "µs").ceiling(c.loopback_rtt_us),
        Figure::new("e2e-max", &workload, l.max_us, "µs").ceiling(c.loopback_rtt_us),
    ];
    Ok((figures, vec![(workload, result.latency)]))
}

fn ceiling_figures(c: &Ceilings) -> Vec<Figure> {
    vec![
        Figure::new(
            "C1",
            "loopback TCP, best of the bench and iperf3",
            c.loopback_tcp_mb_s,
            "MB/s",
        )
        .note(format!(
            "from {}; the bench's configurations: {}",
            c.loopback_tcp_source,
            c.loopback_tcp_trials
                .iter()
                .map(|t| format!("{} {} MB/s", t.config, report::number(t.mb_s)))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Figure::new(
            "C1a",
            "loopback TCP, the bench's best configuration",
            c.loopback_tcp_own_mb_s,
            "MB/s",
        ),
        match c.iperf3_mb_s {
            Some(mb_s) => Figure::new("C1b", "loopback TCP, iperf3 (1 stream)", mb_s, "MB/s"),
            None => Figure::not_run(
                "C1b",
                "loopback TCP, iperf3 (1 stream)",
                "MB/s",
                "",
                &format!("iperf3 {}", c.iperf3),
            ),
        },
        Figure::new(
            "C2",
            "loopback round trip, 64 B, p50",
            c.loopback_rtt_us,
            "µs",
        ),
        Figure::new(
            "C3",
            "buffered sequential write",
            c.buffered_write_mb_s,
            "MB/s",
        ),
        Figure::new(
            "C4",
            "4 KiB append + fdatasync, p50",
            c.fsync_4k_p50_us,
            "µs",
        )
        .note(format!(
            "p99 {} µs; {} syncs/s",
            report::number(c.fsync_4k_p99_us),
            report::number(c.fsync_4k_per_s)
        )),
        Figure::new("C5", "1 MiB append + fdatasync", c.fsync_1m_mb_s, "MB/s"),
    ]
}

fn parse_pairs(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow!("expected name=value, got {pair:?}"))
        })
        .collect()
}

/// CPU model, core count, memory and kernel, for the report's header.
fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(str::to_string))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "machine: {model}, {cores} CPUs, {memory_gib:.0} GiB RAM, Linux {}; load average {}",
        kernel.trim(),
        load_average()
    )
}

/// The 1, 5 and 15 minute load averages: other work on the machine skews every figure.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_string())
}

/// The spawned broker's settings: the caller's, and for `rebalance` a KIP-848 heartbeat
/// interval equal to the classic members' (unless the caller set one).
fn spawn_settings(args: &Args) -> Vec<String> {
    let mut settings = args.broker_set.clone();
    if let Command::Rebalance(r) = &args.command {
        for name in [
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
        ] {
            if !settings.iter().any(|s| s.starts_with(&format!("{name}="))) {
                settings.push(format!("{name}={}", r.heartbeat_ms));
            }
        }
    }
    settings
}
