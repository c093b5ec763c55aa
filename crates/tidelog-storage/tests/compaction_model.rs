//! Property test for compaction: random keyed appends, tombstones, rolls, repeated
//! cleaning passes and restarts against a record-level model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use proptest::prelude::*;
use tidelog_storage::{BatchBuilder, CleanupPolicy, Log, LogConfig};

use common::{decode_records, opts, read_all, Decoded};

const DELETE_RETENTION_MS: i64 = 50;

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<(u8, bool)>),
    Roll,
    Compact(u8),
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((0u8..8, prop::bool::weighted(0.2)), 1..5).prop_map(Op::Append),
        2 => Just(Op::Roll),
        2 => any::<u8>().prop_map(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        segment_ms: 1,
        index_interval_bytes: 60,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        delete_retention_ms: DELETE_RETENTION_MS,
        // Every pass with anything new to clean runs (the model cleans every time).
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// One cleaning pass over records below `horizon`: newest per key, young tombstones.
fn clean(model: &[Decoded], horizon: i64, now: i64) -> Vec<Decoded> {
    let mut newest: HashMap<&Vec<u8>, i64> = HashMap::new();
    for (o, k, _, _) in model.iter().filter(|r| r.0 < horizon) {
        newest.insert(k.as_ref().unwrap(), *o);
    }
    model
        .iter()
        .filter(|(o, k, v, ts)| {
            *o >= horizon
                || (newest[k.as_ref().unwrap()] == *o
                    && (v.is_some() || ts + DELETE_RETENTION_MS > now))
        })
        .cloned()
        .collect()
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let mut log = Log::open(dir.path(), config()).unwrap();
    let mut model: Vec<Decoded> = Vec::new();
    let mut clock = 0i64;
    for op in ops {
        clock += 10;
        match op {
            Op::Append(records) => {
                let mut b = BatchBuilder::new();
                let first = log.log_end_offset();
                for (i, (key, tombstone)) in records.iter().enumerate() {
                    let value = (!tombstone).then(|| format!("v{clock}-{i}").into_bytes());
                    b = b.kv(Some(&[*key]), value.as_deref(), clock);
                    model.push((first + i as i64, Some(vec![*key]), value, clock));
                }
                log.append(&mut b.build().unwrap(), &opts(clock)).unwrap();
            }
            Op::Roll => log.roll_if_due(clock).unwrap(),
            Op::Compact(advance) => {
                clock += i64::from(advance);
                log.set_high_watermark(log.log_end_offset());
                let horizon = *log.segment_base_offsets().last().unwrap();
                let stats = log.compact(clock).unwrap();
                // A pass with nothing dirty and no tombstone due is skipped; cleaning
                // again would change nothing, so the model's pass is the same.
                if stats.segments_cleaned > 0 {
                    assert_eq!(stats.horizon, horizon);
                }
                model = clean(&model, horizon, clock);
            }
            Op::Reopen => {
                log.close().unwrap();
                log = Log::open(dir.path(), config()).unwrap();
            }
            Op::Crash => {
                log.flush().unwrap();
                drop(log);
                log = Log::open(dir.path(), config()).unwrap();
            }
        }
        let got = decode_records(&read_all(&log, log.log_start_offset()));
        assert_eq!(got, model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn compaction_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
