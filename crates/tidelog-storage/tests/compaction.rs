//! Log compaction: newest value per key at its original offset, tombstones, horizon,
//! crash-safe swap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::{decode_records, files_with_ext, opts, read_all, Decoded};
use tidelog_storage::{BatchBuilder, CleanupPolicy, Log, LogConfig, StorageError};

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        delete_retention_ms: 1000,
        ..LogConfig::default()
    }
}

/// Writes 120 records over 10 keys; every 7th record is a tombstone. Timestamp = offset.
fn populate(log: &mut Log) -> Vec<Decoded> {
    let mut model = Vec::new();
    let mut offset = 0i64;
    for round in 0..40 {
        let mut b = BatchBuilder::new();
        for j in 0..3 {
            let key = format!("key{}", (round * 3 + j) % 10).into_bytes();
            let value = (offset % 7 != 3).then(|| format!("v{offset}").into_bytes());
            b = b.kv(Some(&key), value.as_deref(), offset);
            model.push((offset, Some(key), value, offset));
            offset += 1;
        }
        log.append(&mut b.build().unwrap(), &opts(0)).unwrap();
    }
    model
}

/// What compaction must leave: below `horizon`, the newest record per key (over records
/// below the horizon), tombstones only while young; at and above it, everything.
fn expected(model: &[Decoded], horizon: i64, now: i64, retention: i64) -> Vec<Decoded> {
    let mut newest: HashMap<&Vec<u8>, i64> = HashMap::new();
    for (o, k, _, _) in model.iter().filter(|r| r.0 < horizon) {
        newest.insert(k.as_ref().unwrap(), *o);
    }
    model
        .iter()
        .filter(|(o, k, v, ts)| {
            *o >= horizon
                || (newest[k.as_ref().unwrap()] == *o && (v.is_some() || ts + retention > now))
        })
        .cloned()
        .collect()
}

#[test]
fn keeps_the_newest_value_per_key_at_its_original_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let model = populate(&mut log);
    let size_before = log.size_bytes();
    let bases = log.segment_base_offsets();
    let horizon = *bases.last().unwrap();
    let above_before = read_all(&log, horizon);
    // Nothing is cleaned above the high watermark.
    assert_eq!(log.compact(50).unwrap().segments_cleaned, 0);
    log.set_high_watermark(log.log_end_offset());

    // now = 50: tombstones with ts + 1000 > 50 all survive.
    let stats = log.compact(50).unwrap();
    assert_eq!(stats.horizon, horizon);
    assert!(stats.segments_cleaned > 0);
    assert!(log.size_bytes() < size_before);
    let got = decode_records(&read_all(&log, 0));
    assert_eq!(got, expected(&model, horizon, 50, 1000));
    assert_eq!(
        read_all(&log, horizon),
        above_before,
        "above the horizon nothing changes"
    );
    assert_eq!(log.log_end_offset(), 120);
    assert_eq!(log.segment_base_offsets(), bases);

    // Later, tombstones older than delete.retention.ms go too.
    let stats2 = log.compact(1200).unwrap();
    assert!(stats2.records_removed > 0);
    let got = decode_records(&read_all(&log, 0));
    assert_eq!(got, expected(&model, horizon, 1200, 1000));
    assert!(got.iter().filter(|r| r.0 < horizon).all(|r| r.2.is_some()));

    // Indexes of cleaned segments answer reads at every surviving offset.
    for (offset, ..) in &got {
        let r = log.read(*offset, 1, i64::MAX).unwrap();
        let first = decode_records(&[r.slice.unwrap().read_to_vec().unwrap()]);
        assert!(first.iter().any(|x| x.0 == *offset));
    }
    // And it all survives a restart.
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(decode_records(&read_all(&log, 0)), got);
}

#[test]
fn respects_min_compaction_lag_and_policy() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg();
    c.min_compaction_lag_ms = 1_000_000;
    let mut log = Log::open(dir.path(), c).unwrap();
    let model = populate(&mut log);
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.compact(100).unwrap().segments_cleaned, 0);
    assert_eq!(decode_records(&read_all(&log, 0)), model);
    let mut d = cfg();
    d.cleanup_policy = CleanupPolicy::default();
    log.set_config(d);
    assert_eq!(log.compact(10_000_000).unwrap().segments_cleaned, 0);
    // Compacted topics refuse records without a key.
    log.set_config(cfg());
    let mut keyless = BatchBuilder::new().kv(None, Some(b"x"), 0).build().unwrap();
    assert!(matches!(
        log.append(&mut keyless, &opts(0)),
        Err(StorageError::InvalidRecord(_))
    ));
}

#[test]
fn interrupted_swaps_are_completed_or_discarded() {
    let dirty = tempfile::tempdir().unwrap();
    let mut log = Log::open(dirty.path(), cfg()).unwrap();
    populate(&mut log);
    log.close().unwrap();
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dirty.path()).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
    }
    let mut log = Log::open(dirty.path(), cfg()).unwrap();
    log.set_high_watermark(log.log_end_offset());
    log.compact(50).unwrap();
    let cleaned_view = read_all(&log, 0);
    log.close().unwrap();

    // Crash after the commit point: the copy has the old segment plus a `.swap`.
    let first = &files_with_ext(dirty.path(), "log")[0];
    let name = first.file_name().unwrap().to_str().unwrap();
    std::fs::copy(first, copy.path().join(format!("{name}.swap"))).unwrap();
    // Crash before the commit point: a half-written `.cleaned` for another segment.
    let second = files_with_ext(copy.path(), "log")[1].clone();
    let name2 = second.file_name().unwrap().to_str().unwrap();
    std::fs::write(copy.path().join(format!("{name2}.cleaned")), b"half").unwrap();

    let log = Log::open(copy.path(), cfg()).unwrap();
    let view = read_all(&log, 0);
    let recovered = decode_records(&view);
    // Segment 0 is the cleaned one; segment 1 is intact (not cleaned) and complete.
    let ref_first: Vec<_> = decode_records(&cleaned_view)
        .into_iter()
        .filter(|r| r.0 < log.segment_base_offsets()[1])
        .collect();
    let got_first: Vec<_> = recovered
        .iter()
        .filter(|r| r.0 < log.segment_base_offsets()[1])
        .cloned()
        .collect();
    assert_eq!(got_first, ref_first);
    assert_eq!(recovered.last().unwrap().0, 119);
    assert!(files_with_ext(copy.path(), "cleaned").is_empty());
    assert!(files_with_ext(copy.path(), "swap").is_empty());
}

#[test]
fn aborted_transactions_neither_supersede_nor_survive() {
    use tidelog_storage::{AppendOptions, AppendOrigin};
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let mut committed = BatchBuilder::new()
        .kv(Some(b"k"), Some(b"committed"), 1)
        .build()
        .unwrap();
    log.append(&mut committed, &opts(0)).unwrap();
    let mut txn = BatchBuilder::new()
        .producer(7, 0, 0)
        .transactional(true)
        .kv(Some(b"k"), Some(b"aborted"), 2)
        .build()
        .unwrap();
    log.append(&mut txn, &opts(0)).unwrap();
    let coordinator = AppendOptions {
        origin: AppendOrigin::Coordinator,
        ..opts(0)
    };
    let mut abort = BatchBuilder::control_marker(7, 0, false, 0, 3)
        .build()
        .unwrap();
    log.append(&mut abort, &coordinator).unwrap();
    assert_eq!(log.aborted_txns(0, 10).len(), 1);
    log.roll_if_due(i64::MAX).unwrap();
    log.append(&mut common::batch(1, 9, "tail", 1), &opts(0))
        .unwrap();
    log.set_high_watermark(log.log_end_offset());
    let stats = log.compact(0).unwrap();
    assert_eq!(stats.records_removed, 1);
    let got = decode_records(&read_all(&log, 0));
    assert_eq!(
        got[0],
        (0, Some(b"k".to_vec()), Some(b"committed".to_vec()), 1)
    );
    assert!(got.iter().all(|r| r.2.as_deref() != Some(&b"aborted"[..])));
}

/// A follower truncated below the last pass's horizon takes new records where cleaned
/// ones were: they are dirty, so the dirty ratio sees them and the next pass cleans.
#[test]
fn records_taken_after_a_truncation_below_the_horizon_count_as_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.5,
        delete_retention_ms: i64::MAX / 4,
        ..cfg()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    populate(&mut log);
    log.set_high_watermark(log.log_end_offset());
    let first = log.compact(50).unwrap();
    assert!(first.segments_cleaned > 0);
    assert_eq!(
        log.compact(50).unwrap().segments_cleaned,
        0,
        "nothing new: not due"
    );
    let cut = log.segment_base_offsets()[1];
    assert!(cut < first.horizon);
    log.truncate_to(cut).unwrap();
    let mut offset = log.log_end_offset();
    for round in 0..30 {
        let mut b = BatchBuilder::new();
        for j in 0..3 {
            let key = format!("key{}", (round * 3 + j) % 10).into_bytes();
            b = b.kv(Some(&key), Some(format!("new{offset}").as_bytes()), offset);
            offset += 1;
        }
        log.append(&mut b.build().unwrap(), &opts(0)).unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    assert!(
        log.compact(60).unwrap().segments_cleaned > 0,
        "the new records above the cut are dirty"
    );
}
