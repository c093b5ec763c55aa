//! The runtime's real seam to a partition: what the coordinators' shards load back
//! from a real log (records, transactional records, markers, garbage), and steps that
//! append to it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tidelog_storage::{BatchBuilder, Log, LogConfig};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::log::{read_entries, LogEntry, PartitionLog};
use super::{CoordinatorLog, CoordinatorRuntime, LogSource, RuntimeConfig};
use crate::group::GroupShard;
use crate::replica::Partition;
use crate::txn::{TxnMeta, TxnRecord};
use tidelog_env::clock::SystemClock;

fn partition(dir: &std::path::Path, topic: &str) -> Arc<Partition> {
    let log = Log::open(&dir.join(format!("{topic}-0")), LogConfig::default()).unwrap();
    Arc::new(Partition::new(topic.into(), Uuid::nil(), 0, 4, log))
}

fn record(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    BatchBuilder::new()
        .kv(Some(key), value, 100)
        .build()
        .unwrap()
}

#[test]
fn a_partition_reads_back_in_log_order_with_markers_and_producers() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(dir.path(), "__transaction_state");
    p.append(&mut record(b"a", Some(b"1")), 100).unwrap();
    let mut txn = BatchBuilder::new()
        .producer(7, 0, -1)
        .transactional(true)
        .kv(Some(b"b"), Some(b"2"), 100)
        .build()
        .unwrap();
    p.append(&mut txn, 100).unwrap();
    let mut marker = BatchBuilder::control_marker(7, 0, true, 4, 100)
        .build()
        .unwrap();
    p.append_control(&mut marker, 100).unwrap();
    p.append(&mut record(b"a", None), 100).unwrap();
    let (entries, end) = read_entries(&p).unwrap();
    assert_eq!(end, 4);
    assert_eq!(
        entries,
        vec![
            LogEntry::Record {
                offset: 0,
                producer: None,
                key: b"a".to_vec(),
                value: Some(b"1".to_vec())
            },
            LogEntry::Record {
                offset: 1,
                producer: Some(7),
                key: b"b".to_vec(),
                value: Some(b"2".to_vec())
            },
            LogEntry::Marker {
                offset: 2,
                producer_id: 7,
                commit: true
            },
            LogEntry::Record {
                offset: 3,
                producer: None,
                key: b"a".to_vec(),
                value: None
            },
        ]
    );
    let log = PartitionLog::new(Arc::clone(&p), 4);
    let (read, end) = log.read_committed().unwrap().unwrap();
    assert_eq!(
        (read.len(), end),
        (4, 4),
        "a sole replica is committed on append"
    );
}

/// One fixed log for the runtime.
struct OneLog(Arc<dyn CoordinatorLog>);

impl LogSource for OneLog {
    fn log(&self, _topic: &str, _index: i32, epoch: i32) -> Option<Arc<dyn CoordinatorLog>> {
        (epoch == self.0.epoch()).then(|| Arc::clone(&self.0))
    }
}

fn group_runtime(log: Arc<dyn CoordinatorLog>) -> Arc<CoordinatorRuntime<GroupShard>> {
    let config = Arc::new(crate::group::test_config());
    let (effects, _) = mpsc::channel(1);
    let runtime = Arc::new(CoordinatorRuntime::new(
        RuntimeConfig {
            topic: "__consumer_offsets",
            tick: Duration::from_millis(50),
            write_timeout: Duration::from_secs(5),
            queue: 16,
        },
        Arc::new(OneLog(log)),
        Arc::new(SystemClock),
        move |_, _| GroupShard::new(Arc::clone(&config), Arc::default()),
        effects,
    ));
    runtime.lead_only(&HashMap::from([(0, 4)]));
    runtime
}

async fn loaded(runtime: &CoordinatorRuntime<GroupShard>) {
    for _ in 0..500 {
        if runtime.is_loaded(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("never loaded");
}

#[tokio::test]
async fn group_offsets_written_through_the_runtime_load_back_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(dir.path(), "__consumer_offsets");
    let log: Arc<dyn CoordinatorLog> = Arc::new(PartitionLog::new(Arc::clone(&p), 4));
    let runtime = group_runtime(Arc::clone(&log));
    loaded(&runtime).await;
    let commit = |offset: i64| crate::group::CommitRequest {
        group_id: "g".into(),
        generation: -1,
        member_id: String::new(),
        instance_id: None,
        offsets: vec![("t".into(), 0, offset, -1, None)],
    };
    for offset in [5, 9] {
        let request = commit(offset);
        let codes = runtime
            .write(0, move |s, now| s.offset_commit(request, &[true], now))
            .await
            .unwrap();
        assert_eq!(codes, vec![0]);
    }
    // A transaction's offsets, then its marker: committed at the marker.
    let request = commit(12);
    runtime
        .write(0, move |s, now| {
            s.txn_commit(request, (3, 0), None, &[true], now)
        })
        .await
        .unwrap();
    runtime
        .write(0, |s, _| s.complete_transaction(3, 0, true, 4))
        .await
        .unwrap();
    runtime.stop().await;

    let runtime = group_runtime(log);
    loaded(&runtime).await;
    let offsets = runtime
        .read(0, |s| s.fetch_offsets("g", None))
        .await
        .unwrap();
    assert_eq!(
        offsets,
        vec![("t".to_string(), vec![(0, 12, -1, String::new())])]
    );
    assert_eq!(p.offsets().unwrap().high_watermark, 4);
    runtime.stop().await;
}

#[test]
fn transaction_records_read_back_skipping_what_is_not_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let p = partition(dir.path(), "__transaction_state");
    let mut meta = TxnMeta::new(3, 0, 60_000, 10);
    meta.last_update_ms = 11;
    let state = TxnRecord {
        transactional_id: "tx".into(),
        value: Some(meta),
    };
    let key = state.encode_key().unwrap();
    let value = state.encode_value().unwrap();
    p.append(&mut record(&key, value.as_deref()), 100).unwrap();
    // A record whose key is not ours: read back, then refused by the decoder.
    p.append(&mut record(b"\x00\x07nope", Some(b"x")), 100)
        .unwrap();
    let (entries, _) = read_entries(&p).unwrap();
    assert_eq!(entries.len(), 2);
    let decoded: Vec<bool> = entries
        .iter()
        .map(|e| match e {
            LogEntry::Record { key, value, .. } => TxnRecord::decode(key, value.as_deref()).is_ok(),
            LogEntry::Marker { .. } => false,
        })
        .collect();
    assert_eq!(decoded, vec![true, false]);
}
