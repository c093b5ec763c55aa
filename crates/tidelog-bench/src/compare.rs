//! `compare`: the same librdkafka workloads against several Kafka-compatible brokers in
//! one run, interleaved so machine noise spreads over every system (run 1 goes A, B;
//! run 2 B, A; ...), next to the machine's ceilings from the same run. Each figure is
//! reported per system as median / min / max over the runs, with the ratio of the
//! baseline system's median to each peer's.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::Serialize;

use crate::broker::{self, SpawnOptions, SpawnedBroker};
use crate::ceilings::Ceilings;
use crate::cli::{Args, CompareArgs, CompareWorkload, ScaleName};
use crate::load::{self, admin, consume, e2e, produce};
use crate::report::number;
use crate::stats::median;
use crate::targets;

/// A system under comparison.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct System {
    pub(crate) name: String,
    pub(crate) bootstrap: String,
    /// Started by this run (`--spawn-tidelog`).
    pub(crate) spawned: bool,
}

/// How big each workload is.
#[derive(Clone, Debug, Serialize)]
struct Sizes {
    produce_records: u64,
    consume_records: u64,
    ack_seconds: f64,
    pings: u64,
}

impl Sizes {
    fn of(scale: ScaleName) -> Self {
        match scale {
            ScaleName::Small => Self {
                produce_records: 300_000,
                consume_records: 300_000,
                ack_seconds: 10.0,
                pings: 3_000,
            },
            ScaleName::Tiny => Self {
                produce_records: 2_000,
                consume_records: 2_000,
                ack_seconds: 1.5,
                pings: 50,
            },
        }
    }
}

/// One figure a workload yields.
#[derive(Clone, Debug, PartialEq)]
struct Metric {
    id: &'static str,
    what: String,
    unit: &'static str,
    higher_is_better: bool,
    /// Which ceiling bounds it: "loopback TCP" (MB/s) or "loopback round trip".
    ceiling: Option<Ceiling>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ceiling {
    LoopbackTcp,
    RoundTripUs,
    RoundTripMs,
}

impl Ceiling {
    fn value(self, c: &Ceilings) -> f64 {
        match self {
            Ceiling::LoopbackTcp => c.loopback_tcp_mb_s,
            Ceiling::RoundTripUs => c.loopback_rtt_us,
            Ceiling::RoundTripMs => c.loopback_rtt_us / 1e3,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Ceiling::LoopbackTcp => "loopback TCP (C1)",
            Ceiling::RoundTripUs | Ceiling::RoundTripMs => "loopback round trip (C2)",
        }
    }
}

fn metrics(workload: CompareWorkload, args: &CompareArgs) -> Vec<Metric> {
    let size = args.record_size;
    let throughput = |id, what: String| Metric {
        id,
        what,
        unit: "MB/s",
        higher_is_better: true,
        ceiling: Some(Ceiling::LoopbackTcp),
    };
    let latency = |id, what: String, unit, ceiling| Metric {
        id,
        what,
        unit,
        higher_is_better: false,
        ceiling: Some(ceiling),
    };
    match workload {
        CompareWorkload::Produce1 => vec![throughput(
            "produce1",
            format!("produce {size} B records, 1 partition, acks=1, as fast as possible"),
        )],
        CompareWorkload::Produce16 => vec![throughput(
            "produce16",
            format!("produce {size} B records, 16 partitions, acks=1, as fast as possible"),
        )],
        CompareWorkload::Consume => vec![throughput(
            "consume",
            format!("consume {size} B records from the beginning, 4 partitions"),
        )],
        CompareWorkload::AckLatency => {
            let at = format!("{size} B at {} msg/s, 1 partition, acks=1", args.rate);
            vec![
                latency(
                    "ack-p50",
                    format!("ack latency p50 (librdkafka Produce round trip), {at}"),
                    "µs",
                    Ceiling::RoundTripUs,
                ),
                latency(
                    "ack-p99",
                    format!("ack latency p99 (librdkafka Produce round trip), {at}"),
                    "µs",
                    Ceiling::RoundTripUs,
                ),
                latency(
                    "e2e-p50",
                    format!("end-to-end latency p50 (produce to consume), {at}"),
                    "ms",
                    Ceiling::RoundTripMs,
                ),
                latency(
                    "e2e-p99",
                    format!("end-to-end latency p99 (produce to consume), {at}"),
                    "ms",
                    Ceiling::RoundTripMs,
                ),
            ]
        }
        CompareWorkload::Ping => vec![
            latency(
                "ping-p50",
                "produce 100 B, one in flight, acks=1: p50".to_string(),
                "µs",
                Ceiling::RoundTripUs,
            ),
            latency(
                "ping-p99",
                "produce 100 B, one in flight, acks=1: p99".to_string(),
                "µs",
                Ceiling::RoundTripUs,
            ),
        ],
    }
}

/// The order systems run in during run `run` (0-based): forward on even runs,
/// backward on odd ones, so no system always goes first after another's load.
pub(crate) fn run_order(systems: usize, run: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..systems).collect();
    if run % 2 == 1 {
        order.reverse();
    }
    order
}

/// `NAME=HOST:PORT`.
fn parse_broker(spec: &str) -> anyhow::Result<(String, String)> {
    let (name, bootstrap) = spec
        .split_once('=')
        .ok_or_else(|| anyhow!("--broker expects NAME=HOST:PORT, got {spec:?}"))?;
    let (name, bootstrap) = (name.trim(), bootstrap.trim());
    if name.is_empty() || bootstrap.is_empty() {
        bail!("--broker expects NAME=HOST:PORT, got {spec:?}");
    }
    Ok((name.to_string(), bootstrap.to_string()))
}

/// A broker name as it may appear in a topic name.
fn topic_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn workload_name(workload: CompareWorkload) -> &'static str {
    match workload {
        CompareWorkload::Produce1 => "produce1",
        CompareWorkload::Produce16 => "produce16",
        CompareWorkload::Consume => "consume",
        CompareWorkload::AckLatency => "ack-latency",
        CompareWorkload::Ping => "ping",
    }
}

/// Whether `bootstrap` answers a Metadata request within 10 s; a system that does not
/// gets an error in every row instead of a minute of admin timeouts per workload.
fn reachable(bootstrap: &str) -> Result<(), String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let client: BaseConsumer = load::base_config(bootstrap)
        .create()
        .map_err(|e| format!("creating a client: {e}"))?;
    client
        .fetch_metadata(None, Duration::from_secs(10))
        .map(|_| ())
        .map_err(|e| format!("no Metadata answer from {bootstrap}: {e}"))
}

/// One workload once against one system: the metric values in `metrics`' order.
fn run_once(
    workload: CompareWorkload,
    system: &System,
    args: &CompareArgs,
    sizes: &Sizes,
) -> anyhow::Result<Vec<f64>> {
    let bootstrap = &system.bootstrap;
    let topic = load::fresh_topic(&format!(
        "cmp-{}-{}",
        topic_safe(&system.name),
        workload_name(workload)
    ));
    let partitions = match workload {
        CompareWorkload::Produce16 => 16,
        CompareWorkload::Consume => 4,
        _ => 1,
    };
    admin::create_topic(bootstrap, &topic, partitions, 1, &[])?;
    let result = measure(workload, bootstrap, &topic, args, sizes);
    admin::delete_topic(bootstrap, &topic);
    result
}

fn measure(
    workload: CompareWorkload,
    bootstrap: &str,
    topic: &str,
    args: &CompareArgs,
    sizes: &Sizes,
) -> anyhow::Result<Vec<f64>> {
    match workload {
        CompareWorkload::Produce1 | CompareWorkload::Produce16 => {
            let spec =
                targets::produce_spec(bootstrap, topic, args.record_size, sizes.produce_records);
            Ok(vec![produce::run(&spec)?.mb_s])
        }
        CompareWorkload::Consume => {
            let fill =
                targets::produce_spec(bootstrap, topic, args.record_size, sizes.consume_records);
            produce::run(&fill)?;
            let result = consume::run(bootstrap, topic, Duration::from_secs(600))?;
            Ok(vec![result.mb_s])
        }
        CompareWorkload::AckLatency => {
            let spec = e2e::E2eSpec {
                bootstrap: bootstrap.to_string(),
                topic: topic.to_string(),
                partitions: 1,
                record_size: args.record_size,
                rate: args.rate,
                duration: Duration::from_secs_f64(sizes.ack_seconds),
                warmup: Duration::from_secs_f64((sizes.ack_seconds / 5.0).min(2.0)),
                acks: "1".to_string(),
                linger_ms: 0,
                sticky_ms: None,
            };
            let result = e2e::run(&spec)?;
            if result.received == 0 {
                bail!("no record came back ({} sent)", result.sent);
            }
            Ok(vec![
                result.producer.rtt_p50_us,
                result.producer.rtt_p99_us,
                result.latency.p50_us / 1e3,
                result.latency.p99_us / 1e3,
            ])
        }
        CompareWorkload::Ping => {
            let mut spec = targets::produce_spec(bootstrap, topic, 100, sizes.pings);
            spec.one_in_flight = true;
            spec.linger_ms = 0;
            let latency = produce::run(&spec)?
                .latency
                .ok_or_else(|| anyhow!("no per-record latency from a one-in-flight run"))?;
            Ok(vec![latency.p50_us, latency.p99_us])
        }
    }
}

/// What one (workload, system) pair gave in each run: values or the error.
type Outcomes = Vec<Result<Vec<f64>, String>>;

/// One system's figures for one metric.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Cell {
    pub(crate) system: String,
    /// One value per run that succeeded, in run order.
    pub(crate) runs: Vec<f64>,
    pub(crate) median: Option<f64>,
    pub(crate) min: Option<f64>,
    pub(crate) max: Option<f64>,
    /// The median over the metric's ceiling (a fraction of loopback TCP for
    /// throughputs, a multiple of the loopback round trip for latencies).
    pub(crate) of_ceiling: Option<f64>,
    /// The baseline's median over this system's (absent for the baseline itself).
    pub(crate) ratio: Option<f64>,
    /// Why some or all runs have no value.
    pub(crate) error: Option<String>,
}

/// One metric across every system.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) workload: String,
    pub(crate) unit: String,
    /// "higher" or "lower".
    pub(crate) better: String,
    pub(crate) ceiling: Option<f64>,
    pub(crate) ceiling_name: Option<String>,
    pub(crate) cells: Vec<Cell>,
}

fn cell(system: &str, index: usize, outcomes: &Outcomes, ceiling: Option<f64>) -> Cell {
    let runs: Vec<f64> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().and_then(|v| v.get(index).copied()))
        .filter(|v| v.is_finite())
        .collect();
    let errors: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    let error = errors.first().map(|first| {
        if errors.len() == outcomes.len() {
            (*first).clone()
        } else {
            format!(
                "{} of {} runs failed: {first}",
                errors.len(),
                outcomes.len()
            )
        }
    });
    let (median, min, max) = if runs.is_empty() {
        (None, None, None)
    } else {
        (
            Some(median(&runs)),
            runs.iter().copied().reduce(f64::min),
            runs.iter().copied().reduce(f64::max),
        )
    };
    Cell {
        system: system.to_string(),
        of_ceiling: median.zip(ceiling.filter(|c| *c > 0.0)).map(|(m, c)| m / c),
        runs,
        median,
        min,
        max,
        ratio: None,
        error,
    }
}

/// The table for every metric: each system's median / min / max, and the baseline's
/// median over each peer's. `outcomes[w][s]` holds workload w's runs on system s.
fn rows(
    metric_sets: &[Vec<Metric>],
    systems: &[System],
    baseline: usize,
    outcomes: &[Vec<Outcomes>],
    ceilings: Option<&Ceilings>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for (w, metrics) in metric_sets.iter().enumerate() {
        for (index, metric) in metrics.iter().enumerate() {
            let ceiling = metric.ceiling.zip(ceilings).map(|(c, all)| c.value(all));
            let mut cells: Vec<Cell> = systems
                .iter()
                .enumerate()
                .map(|(s, system)| cell(&system.name, index, &outcomes[w][s], ceiling))
                .collect();
            let base = cells.get(baseline).and_then(|c| c.median);
            for (s, cell) in cells.iter_mut().enumerate() {
                if s != baseline {
                    cell.ratio = base
                        .zip(cell.median)
                        .filter(|(_, peer)| *peer != 0.0)
                        .map(|(b, p)| b / p);
                }
            }
            rows.push(Row {
                id: metric.id.to_string(),
                workload: metric.what.clone(),
                unit: metric.unit.to_string(),
                better: if metric.higher_is_better {
                    "higher"
                } else {
                    "lower"
                }
                .to_string(),
                ceiling,
                ceiling_name: metric.ceiling.map(|c| c.words().to_string()),
                cells,
            });
        }
    }
    rows
}

/// The human tables, one per metric.
fn render(rows: &[Row], baseline: &str) -> String {
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(
            out,
            "{}: {} ({}, {} is better{})",
            row.id,
            row.workload,
            row.unit,
            row.better,
            match (&row.ceiling_name, row.ceiling) {
                (Some(name), Some(value)) => format!("; ceiling {name} {}", number(value)),
                _ => String::new(),
            }
        );
        let header = [
            "system".to_string(),
            "median".to_string(),
            "min".to_string(),
            "max".to_string(),
            "runs".to_string(),
            "/ceiling".to_string(),
            format!("{baseline}/system"),
        ];
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), number);
        let lines: Vec<[String; 7]> = row
            .cells
            .iter()
            .map(|c| {
                [
                    c.system.clone(),
                    opt(c.median),
                    opt(c.min),
                    opt(c.max),
                    c.runs.len().to_string(),
                    opt(c.of_ceiling),
                    if c.system == baseline {
                        "(baseline)".to_string()
                    } else {
                        opt(c.ratio)
                    },
                ]
            })
            .collect();
        let mut widths = header.clone().map(|h| h.chars().count());
        for line in &lines {
            for (w, cell) in widths.iter_mut().zip(line) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut put = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            let _ = writeln!(out, "  {}", padded.join("  ").trim_end());
        };
        put(&header);
        for line in &lines {
            put(line);
        }
        for c in &row.cells {
            if let Some(error) = &c.error {
                let _ = writeln!(out, "  {}: {error}", c.system);
            }
        }
        out.push('\n');
    }
    out
}

/// Everything `--json` writes.
#[derive(Serialize)]
struct Report<'a> {
    machine: String,
    systems: &'a [System],
    baseline: &'a str,
    runs: usize,
    /// The systems' order in each run.
    order: Vec<Vec<String>>,
    sizes: &'a Sizes,
    ceilings: &'a Ceilings,
    rows: &'a [Row],
}

pub(crate) fn run(
    args: &Args,
    compare: &CompareArgs,
    ceilings: &Ceilings,
    work_root: &Path,
    machine: String,
) -> anyhow::Result<()> {
    if compare.workloads.is_empty() {
        bail!("compare: --workloads names none");
    }
    let pin = !args.no_pin
        && broker::taskset_available()
        && std::thread::available_parallelism().map_or(1, usize::from) >= 2;
    let mut spawned = Vec::new();
    let mut systems = Vec::new();
    for name in &compare.spawn_tidelog {
        let binary = broker::locate_tidelog(args.tidelog_bin.as_deref()).ok_or_else(|| {
            anyhow!("--spawn-tidelog: no tidelog binary (build it, or pass --tidelog-bin / TIDELOG_BIN)")
        })?;
        let broker = SpawnedBroker::start(SpawnOptions {
            binary,
            work_root: work_root.to_path_buf(),
            cpu: pin.then_some(0),
            settings: args.broker_set.clone(),
            nofile: args.broker_nofile,
            ssl_keystore: None,
        })
        .with_context(|| format!("starting tidelog {name:?}"))?;
        systems.push(System {
            name: name.clone(),
            bootstrap: broker.bootstrap(),
            spawned: true,
        });
        spawned.push(broker);
    }
    for spec in &compare.brokers {
        let (name, bootstrap) = parse_broker(spec)?;
        systems.push(System {
            name,
            bootstrap,
            spawned: false,
        });
    }
    if systems.len() < 2 {
        bail!("compare needs at least two systems (--broker NAME=HOST:PORT, --spawn-tidelog)");
    }
    for (i, s) in systems.iter().enumerate() {
        if systems[..i].iter().any(|t| t.name == s.name) {
            bail!("compare: two systems are named {:?}", s.name);
        }
    }
    let baseline = match &compare.baseline {
        Some(name) => systems
            .iter()
            .position(|s| &s.name == name)
            .ok_or_else(|| anyhow!("--baseline {name:?} names no system"))?,
        None => 0,
    };
    if pin {
        broker::pin_self(1)?;
        eprintln!(
            "load pinned to CPU 1; spawned brokers on CPU 0, each in a session of its own (start the others with `setsid taskset -c 0` for the same footing)"
        );
    }
    for s in &systems {
        eprintln!(
            "system {}: {}{}",
            s.name,
            s.bootstrap,
            if s.spawned { " (spawned tidelog)" } else { "" }
        );
    }
    let sizes = Sizes::of(compare.scale);
    let runs = compare.runs.max(1);
    let metric_sets: Vec<Vec<Metric>> = compare
        .workloads
        .iter()
        .map(|w| metrics(*w, compare))
        .collect();
    let mut outcomes: Vec<Vec<Outcomes>> =
        vec![vec![Vec::new(); systems.len()]; compare.workloads.len()];
    for (s, system) in systems.iter().enumerate() {
        if let Err(e) = reachable(&system.bootstrap) {
            eprintln!("system {} unreachable: {e}", system.name);
            for per_system in &mut outcomes {
                per_system[s].push(Err(format!("before run 1: {e}")));
            }
        }
    }
    let mut order_names = Vec::new();
    for run in 0..runs {
        let order = run_order(systems.len(), run);
        order_names.push(order.iter().map(|&s| systems[s].name.clone()).collect());
        for (w, workload) in compare.workloads.iter().enumerate() {
            for &s in &order {
                let system = &systems[s];
                // A workload that failed on a system is not tried again there: the
                // cause (an unsupported API, a broker gone) rarely goes away, and each
                // try can cost a minute of timeouts.
                if outcomes[w][s].iter().any(Result::is_err) {
                    continue;
                }
                let name = workload_name(*workload);
                eprintln!("run {}/{runs}: {name} on {}", run + 1, system.name);
                let outcome = run_once(*workload, system, compare, &sizes)
                    .map_err(|e| format!("run {}: {e:#}", run + 1));
                if let Err(e) = &outcome {
                    eprintln!("  {name} failed on {}: {e}", system.name);
                }
                outcomes[w][s].push(outcome);
            }
        }
    }
    let table = rows(&metric_sets, &systems, baseline, &outcomes, Some(ceilings));
    let baseline_name = systems[baseline].name.clone();
    println!("{machine}");
    println!(
        "ceilings: loopback TCP {} MB/s (C1, from {}; iperf3: {}), loopback round trip p50 {} µs (C2)",
        number(ceilings.loopback_tcp_mb_s),
        ceilings.loopback_tcp_source,
        ceilings
            .iperf3_mb_s
            .map_or_else(|| ceilings.iperf3.clone(), |v| format!("{} MB/s", number(v))),
        number(ceilings.loopback_rtt_us),
    );
    println!(
        "{runs} runs per system, interleaved (order alternates); ratio = {baseline_name}'s median / the system's median\n"
    );
    print!("{}", render(&table, &baseline_name));
    if let Some(path) = &args.json {
        crate::report::write_json(
            path,
            &Report {
                machine,
                systems: &systems,
                baseline: &baseline_name,
                runs,
                order: order_names,
                sizes: &sizes,
                ceilings,
                rows: &table,
            },
        )?;
    }
    drop(spawned);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system(name: &str) -> System {
        System {
            name: name.to_string(),
            bootstrap: "127.0.0.1:1".to_string(),
            spawned: false,
        }
    }

    #[test]
    fn runs_alternate_the_order_of_the_systems() {
        assert_eq!(run_order(2, 0), [0, 1]);
        assert_eq!(run_order(2, 1), [1, 0]);
        assert_eq!(run_order(2, 2), [0, 1]);
        assert_eq!(run_order(3, 1), [2, 1, 0]);
        assert_eq!(run_order(1, 1), [0]);
    }

    #[test]
    fn broker_specs_and_topic_names() {
        assert_eq!(
            parse_broker("nisshi=127.0.0.1:9192").unwrap(),
            ("nisshi".to_string(), "127.0.0.1:9192".to_string())
        );
        assert!(parse_broker("127.0.0.1:9192").is_err());
        assert!(parse_broker("=127.0.0.1:9192").is_err());
        assert_eq!(topic_safe("kafka 3.9/kraft"), "kafka_3_9_kraft");
    }

    #[test]
    fn the_table_has_median_min_max_and_the_baseline_ratio() {
        let throughput = Metric {
            id: "produce1",
            what: "produce".to_string(),
            unit: "MB/s",
            higher_is_better: true,
            ceiling: None,
        };
        let systems = [system("tidelog"), system("peer"), system("broken")];
        let outcomes = vec![vec![
            vec![Ok(vec![300.0]), Ok(vec![100.0]), Ok(vec![200.0])],
            vec![
                Ok(vec![50.0]),
                Ok(vec![80.0]),
                Ok(vec![40.0]),
                Ok(vec![60.0]),
            ],
            vec![Err("run 1: CreateTopics t: UnsupportedVersion".to_string())],
        ]];
        let rows = rows(&[vec![throughput]], &systems, 0, &outcomes, None);
        assert_eq!(rows.len(), 1);
        let cells = &rows[0].cells;
        assert_eq!(
            (cells[0].median, cells[0].min, cells[0].max),
            (Some(200.0), Some(100.0), Some(300.0))
        );
        assert_eq!(cells[0].ratio, None, "no ratio to itself");
        assert_eq!(cells[1].median, Some(55.0));
        assert_eq!((cells[1].min, cells[1].max), (Some(40.0), Some(80.0)));
        let ratio = cells[1].ratio.unwrap();
        assert!((ratio - 200.0 / 55.0).abs() < 1e-9, "{ratio}");
        assert_eq!(cells[2].median, None);
        assert_eq!(cells[2].ratio, None);
        assert!(cells[2]
            .error
            .as_deref()
            .unwrap()
            .contains("UnsupportedVersion"));
        let text = render(&rows, "tidelog");
        assert!(text.contains("tidelog/system"), "{text}");
        assert!(text.contains("(baseline)"), "{text}");
        assert!(text.contains("3.64"), "{text}");
        assert!(text.contains("broken: run 1: CreateTopics"), "{text}");
    }

    #[test]
    fn a_named_baseline_and_partial_failures() {
        let latency = Metric {
            id: "ping-p99",
            what: "ping".to_string(),
            unit: "µs",
            higher_is_better: false,
            ceiling: None,
        };
        let systems = [system("a"), system("b")];
        let outcomes = vec![vec![
            vec![Ok(vec![400.0]), Err("run 2: timed out".to_string())],
            vec![Ok(vec![100.0]), Ok(vec![200.0])],
        ]];
        let rows = rows(&[vec![latency]], &systems, 1, &outcomes, None);
        let cells = &rows[0].cells;
        assert_eq!(cells[0].runs, [400.0]);
        assert_eq!(cells[0].ratio, Some(150.0 / 400.0));
        assert_eq!(cells[1].ratio, None);
        assert_eq!(
            cells[0].error.as_deref(),
            Some("1 of 2 runs failed: run 2: timed out")
        );
        assert_eq!(rows[0].better, "lower");
    }
}
