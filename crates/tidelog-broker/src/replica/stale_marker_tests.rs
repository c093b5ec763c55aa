//! Transaction markers a leader refuses: older than the producer epoch or the
//! coordinator epoch its log already holds for that producer (Kafka's checks on an
//! end-transaction marker), so that a zombie coordinator's late ABORT cannot close a
//! later transaction of the same producer.

use kafka_protocol::error::ResponseError;
use tidelog_storage::{BatchBuilder, Log, LogConfig};
use uuid::Uuid;

use super::{Partition, PartitionError, StaleMarker};

fn partition() -> (tempfile::TempDir, Partition) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(&dir.path().join("t-0"), LogConfig::default()).unwrap();
    (dir, Partition::new("t".into(), Uuid::nil(), 0, 0, log))
}

fn txn_batch(producer_epoch: i16, first_seq: i32, value: &str) -> Vec<u8> {
    BatchBuilder::new()
        .producer(7, producer_epoch, first_seq)
        .transactional(true)
        .kv(Some(b"k"), Some(value.as_bytes()), 1000)
        .build()
        .unwrap()
}

fn marker(producer_epoch: i16, commit: bool, coordinator_epoch: i32) -> Vec<u8> {
    BatchBuilder::control_marker(7, producer_epoch, commit, coordinator_epoch, 1000)
        .build()
        .unwrap()
}

fn refused(result: Result<impl Sized, PartitionError>) -> i16 {
    match result {
        Err(PartitionError::StaleMarker(stale)) => stale.code(),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a stale marker was appended"),
    }
}

#[test]
fn a_marker_of_an_older_producer_epoch_does_not_close_the_next_transaction() {
    let (_dir, p) = partition();
    p.append(&mut txn_batch(0, 0, "first"), 1000).unwrap(); // 0
    p.append_control(&mut marker(1, true, 3), 1000).unwrap(); // 1: committed, epoch bumped (TV2)
    p.append(&mut txn_batch(1, 0, "second"), 1000).unwrap(); // 2: the next transaction
    let late = p.append_control(&mut marker(0, false, 3), 1000);
    assert_eq!(refused(late), ResponseError::InvalidProducerEpoch.code());
    // The open transaction is still open: nothing aborted it.
    let o = p.offsets().unwrap();
    assert_eq!((o.high_watermark, o.last_stable), (3, 2));
    p.append_control(&mut marker(2, true, 3), 1000).unwrap(); // 3
    let read = p.read(0, 1 << 20, true).unwrap();
    assert!(read.aborted.is_empty(), "no transaction was aborted");
    assert_eq!(read.last_stable_offset, 4);
}

#[test]
fn a_marker_of_an_older_coordinator_is_fenced() {
    let (_dir, p) = partition();
    p.append(&mut txn_batch(0, 0, "first"), 1000).unwrap();
    p.append_control(&mut marker(0, true, 5), 1000).unwrap();
    p.append(&mut txn_batch(0, 1, "second"), 1000).unwrap();
    // TV1: the same producer epoch, but the marker comes from the coordinator before.
    let zombie = p.append_control(&mut marker(0, false, 4), 1000);
    assert_eq!(
        refused(zombie),
        ResponseError::TransactionCoordinatorFenced.code()
    );
    assert_eq!(
        p.offsets().unwrap().last_stable,
        2,
        "the open transaction stays open"
    );
    // The same coordinator again (a retried marker) and a newer one are accepted.
    p.append_control(&mut marker(0, true, 5), 1000).unwrap();
    p.append(&mut txn_batch(0, 2, "third"), 1000).unwrap();
    p.append_control(&mut marker(0, false, 6), 1000).unwrap();
    let read = p.read(0, 1 << 20, true).unwrap();
    let aborted: Vec<i64> = read.aborted.iter().map(|t| t.first_offset).collect();
    assert_eq!(aborted, vec![4], "only the third transaction was aborted");
}

#[test]
fn the_codes_are_kafkas() {
    let epoch = StaleMarker::ProducerEpoch {
        producer_id: 1,
        got: 0,
        current: 1,
    };
    let coordinator = StaleMarker::CoordinatorEpoch {
        producer_id: 1,
        got: 0,
        current: 1,
    };
    assert_eq!(epoch.code(), 47);
    assert_eq!(coordinator.code(), 52);
}
