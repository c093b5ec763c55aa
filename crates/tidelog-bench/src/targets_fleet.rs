//! T8 and T9 need brokers of their own (fresh memory, a data dir to restart on), so
//! they start them with the same options as `--spawn`.

use std::time::Duration;

use crate::broker::{SpawnOptions, SpawnedBroker};
use crate::load::{self, admin, produce};
use crate::report::Figure;
use crate::targets::{produce_spec, Scale};

/// T8: RSS with idle partitions, many partitions accepting writes, open files each.
pub(crate) fn partitions(options: &SpawnOptions, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let broker = SpawnedBroker::start(options.clone())?;
    let bootstrap = broker.bootstrap();
    let idle = scale.t8_idle_partitions.max(1);
    let many = scale.t8_many_partitions.max(idle);
    let first = load::fresh_topic("t8");
    admin::create_topic(&bootstrap, &first, idle, 1, &[])?;
    let acked_first = produce::touch_partitions(&bootstrap, &first, idle)?;
    // Let the broker settle (allocator caches, idle timers) before reading its RSS.
    std::thread::sleep(Duration::from_secs(1));
    let rss_mb = broker.rss_bytes().map_or(f64::NAN, |b| b as f64 / 1e6);
    // Counted while every bench partition is complete: later, a half-created topic
    // (e.g. when the broker runs out of descriptors) would skew the average.
    let idle_files = broker
        .open_partition_files("bench-t8-")
        .map_or(f64::NAN, |f| f as f64);

    // Up to `many` partitions, in topics of at most 1,000 each; a failure stops the
    // growth and is reported with how far it got.
    let mut total = idle;
    let mut acked = acked_first;
    let mut failure = String::new();
    let growth_started = std::time::Instant::now();
    while total < many {
        let count = (many - total).min(1_000);
        let topic = load::fresh_topic("t8");
        let grown = admin::create_topic(&bootstrap, &topic, count, 1, &[])
            .and_then(|()| produce::touch_partitions(&bootstrap, &topic, count));
        match grown {
            Ok(n) => acked += n,
            Err(error) => {
                failure = format!("; stopped at {total} partitions: {error:#}");
                break;
            }
        }
        total += count;
    }
    let growth_seconds = growth_started.elapsed().as_secs_f64();
    let files = broker
        .open_partition_files("bench-t8-")
        .map_or(f64::NAN, |f| f as f64);
    let limit = broker
        .pid()
        .and_then(crate::procfs::max_open_files)
        .map_or("unknown".to_string(), |l| l.to_string());
    let descriptors = broker
        .pid()
        .and_then(crate::procfs::open_fds)
        .map_or(f64::NAN, |f| f as f64);
    let rss_many_mb = broker.rss_bytes().map_or(f64::NAN, |b| b as f64 / 1e6);
    let scaled = if idle == 1_000 && many == 10_000 {
        String::new()
    } else {
        " (scaled down: the target names 1,000 and 10,000)".to_string()
    };
    Ok(vec![
        Figure::new("T8a", &format!("RSS with {idle} idle partitions"), rss_mb, "MB")
            .bound(256.0, true, "RSS ≤ 256 MB at 1,000 partitions")
            .note(format!("each partition holds one 100 B record{scaled}")),
        Figure::new("T8b", &format!("{many} partitions accept a write"), acked as f64, "partitions")
            .bound(f64::from(many), false, "10,000 partitions work")
            .note(format!(
                "RSS at {total} partitions: {} MB; creating and writing {} partitions took {:.1} s{scaled}{failure}",
                crate::report::number(rss_many_mb),
                total - idle,
                growth_seconds
            )),
        Figure::new("T8c", &format!("open data files per partition at {idle}"), idle_files / f64::from(idle), "files")
            .bound(3.0, true, "≤ 3 open files per partition replica")
            .note(format!(
                "{idle_files} files open for {idle} partitions; at the end {files} files open in the bench topics' partition dirs, {descriptors} descriptors in all; the broker's open-file limit is {limit}"
            )),
    ])
}

/// T9: fill `t9_partitions` partitions with `t9_bytes`, then time a clean restart and
/// a restart after kill -9 (with fresh unflushed writes) until `/readyz` answers.
pub(crate) fn restart(options: &SpawnOptions, scale: &Scale) -> anyhow::Result<Vec<Figure>> {
    let mut broker = SpawnedBroker::start(options.clone())?;
    let bootstrap = broker.bootstrap();
    let partitions = scale.t9_partitions.max(1);
    let topic = load::fresh_topic("t9");
    admin::create_topic(&bootstrap, &topic, partitions, 1, &[])?;
    produce::touch_partitions(&bootstrap, &topic, partitions)?;
    let mut spec = produce_spec(&bootstrap, &topic, 1024, scale.t9_bytes / 1024);
    // Keyed, so records spread over every partition rather than sticking to a few.
    spec.keyed = true;
    produce::run(&spec)?;

    let shutdown = broker.stop_clean()?;
    let clean = broker.restart(Duration::from_secs(300))?;

    let mut more = produce_spec(
        &bootstrap,
        &topic,
        1024,
        (scale.t9_bytes / 1024 / 10).max(1),
    );
    more.keyed = true;
    produce::run(&more)?;
    broker.kill_hard()?;
    let crashed = broker.restart(Duration::from_secs(300))?;

    let size = format!(
        "{partitions} partitions, {} MB",
        crate::report::number(scale.t9_bytes as f64 / 1e6)
    );
    let scaled = if partitions == 1_000 && scale.t9_bytes >= 10_000_000_000 {
        String::new()
    } else {
        " (scaled down: the target names 1,000 partitions and 10 GB)".to_string()
    };
    Ok(vec![
        Figure::new(
            "T9a",
            &format!("clean restart to ready, {size}"),
            clean.as_secs_f64(),
            "s",
        )
        .bound(2.0, true, "< 2 s")
        .note(format!(
            "process start to /readyz 200; the clean shutdown before it took {:.1} s{scaled}",
            shutdown.as_secs_f64()
        )),
        Figure::new(
            "T9b",
            &format!("restart after kill -9 to ready, {size} + 10 % unflushed"),
            crashed.as_secs_f64(),
            "s",
        )
        .bound(30.0, true, "< 30 s")
        .note(format!("process start to /readyz 200{scaled}")),
    ])
}
