//! T10: T1's workload with acks=all against three local nodes (RF 3,
//! min.insync.replicas=2), next to T1's figure from the same run.

use std::time::{Duration, Instant};

use crate::broker::{taskset_available, SpawnOptions};
use crate::cluster::SpawnedCluster;
use crate::load::{self, admin, produce};
use crate::report::{number, Figure};
use crate::stats::median;
use crate::targets::{list, produce_spec, Scale};

pub(crate) const T10_TARGET: &str = "≥ 0.3 × T1's throughput";
pub(crate) const T10_WORKLOAD: &str = "RF 3, acks=all, 3 local nodes";

/// Runs T10 on a fresh cluster; `t1_mb_s` is T1's median from this run, if T1 ran.
pub(crate) fn t10(
    options: &SpawnOptions,
    scale: &Scale,
    t1_mb_s: Option<f64>,
) -> anyhow::Result<Vec<Figure>> {
    let started = Instant::now();
    let mut cluster = SpawnedCluster::start(options, 3, Duration::from_secs(60))?;
    let ready = started.elapsed();
    let bootstrap = cluster.bootstrap();
    let configs = [("min.insync.replicas".to_string(), "2".to_string())];
    let mut runs = Vec::new();
    let mut node_cpu = [0.0_f64; 3];
    let mut load_cpu = 0.0;
    let mut wall = 0.0;
    let mut bytes = 0u64;
    let mut dirty_gb = Vec::new();
    for _ in 0..scale.runs.max(1) {
        let topic = load::fresh_topic("t10");
        admin::create_topic(&bootstrap, &topic, 4, 3, &configs)?;
        let mut spec = produce_spec(&bootstrap, &topic, 1024, scale.t1_records);
        spec.acks = "all".to_string();
        dirty_gb.extend(crate::procfs::dirty_bytes().map(|b| b as f64 / 1e9));
        let nodes_before = cluster.cpu_seconds();
        let load_before = crate::procfs::cpu_seconds(std::process::id());
        let result = produce::run(&spec);
        let nodes_after = cluster.cpu_seconds();
        let load_after = crate::procfs::cpu_seconds(std::process::id());
        admin::delete_topic(&bootstrap, &topic);
        let result = result?;
        for (total, (after, before)) in node_cpu
            .iter_mut()
            .zip(nodes_after.iter().zip(&nodes_before))
        {
            *total += after - before;
        }
        if let (Some(before), Some(after)) = (load_before, load_after) {
            load_cpu += after - before;
        }
        wall += result.seconds;
        bytes += result.bytes;
        runs.push(result.mb_s);
    }
    let (stopped, killed) = cluster.stop(Duration::from_secs(30))?;
    drop(cluster);

    let pinning = match options.cpu.filter(|_| taskset_available()) {
        Some(cpu) => format!(
            "all 3 nodes pinned to CPU {cpu} (taskset -c {cpu}, as T1's single broker), the load to the other CPU"
        ),
        None => "nodes and load unpinned".to_string(),
    };
    let nodes_total: f64 = node_cpu.iter().sum();
    let gb = (bytes as f64 / 1e9).max(f64::EPSILON);
    let profile = format!(
        "CPU over {:.1} s of produce: nodes {} s ({:.0} % of one core together, {} core-s/GB), \
         load process {} s ({} core-s/GB)",
        wall,
        node_cpu.map(number).join(" / "),
        100.0 * nodes_total / wall.max(f64::EPSILON),
        number(nodes_total / gb),
        number(load_cpu),
        number(load_cpu / gb),
    );
    let note = format!(
        "{} records per run, 4 partitions, min.insync.replicas=2, leaders spread over the nodes; \
         runs {}; dirty page cache before each run {} GB; {pinning}; {profile}; cluster ready in {:.1} s, stopped in {:.1} s{}",
        scale.t1_records,
        list(&runs),
        list(&dirty_gb),
        ready.as_secs_f64(),
        stopped.as_secs_f64(),
        if killed > 0 {
            format!(" ({killed} node(s) killed after the 30 s SIGTERM grace)")
        } else {
            String::new()
        },
    );
    let figure = Figure::new(
        "T10",
        "produce 1 KiB, acks=all, RF 3, 3 local nodes, 256 KiB batches",
        median(&runs),
        "MB/s",
    );
    let figure = match t1_mb_s {
        Some(t1) => figure
            .ceiling(t1)
            .at_least_ratio(0.3, T10_TARGET)
            .note(format!("ceiling = T1's median in this run; {note}")),
        None => figure.at_least_ratio(0.3, T10_TARGET).note(format!(
            "no ratio: T1 did not run in this invocation (add it to --only); {note}"
        )),
    };
    Ok(vec![figure])
}
