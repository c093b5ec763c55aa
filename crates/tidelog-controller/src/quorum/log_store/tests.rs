//! Unit tests of the raft log files: append, truncate, purge, reopen, damage.

use openraft::{CommittedLeaderId, EntryPayload};

use super::*;
use crate::quorum::types::MetadataBatch;
use crate::record::MetadataRecord;

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(MetadataBatch {
            records: vec![MetadataRecord::RemoveTopic {
                topic_id: uuid::Uuid::from_u128(u128::from(index)),
            }],
        }),
    }
}

fn indexes(store: &LogStore) -> Vec<(u64, u64)> {
    read_range(&store.lock(), ..)
        .iter()
        .map(|e| (e.log_id.leader_id.term, e.log_id.index))
        .collect()
}

#[test]
fn append_truncate_purge_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    store.write_entries((0..10).map(|i| entry(1, i))).unwrap();
    // A new leader overrules entries 7.. and writes its own.
    store.truncate_from(7).unwrap();
    store.write_entries((7..9).map(|i| entry(2, i))).unwrap();
    let want: Vec<(u64, u64)> = (0..7)
        .map(|i| (1, i))
        .chain((7..9).map(|i| (2, i)))
        .collect();
    assert_eq!(indexes(&store), want);
    drop(store);

    let store = LogStore::open(dir.path()).unwrap();
    assert_eq!(indexes(&store), want);
    store
        .purge_upto(LogId::new(CommittedLeaderId::new(1, 1), 4))
        .unwrap();
    store.write_entries([entry(2, 9)]).unwrap();
    drop(store);

    let store = LogStore::open(dir.path()).unwrap();
    let inner = store.lock();
    assert_eq!(inner.purged.map(|p| p.index), Some(4));
    assert_eq!(
        last_log_id(&inner).map(|l| (l.leader_id.term, l.index)),
        Some((2, 9))
    );
    drop(inner);
    let want: Vec<(u64, u64)> = (5..7)
        .map(|i| (1, i))
        .chain((7..10).map(|i| (2, i)))
        .collect();
    assert_eq!(indexes(&store), want);
}

#[test]
fn purging_past_the_last_entry_leaves_an_empty_log_that_continues() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    store.write_entries((0..3).map(|i| entry(1, i))).unwrap();
    // A snapshot installed from the leader covers more than this log holds.
    store
        .purge_upto(LogId::new(CommittedLeaderId::new(3, 1), 20))
        .unwrap();
    store.write_entries([entry(3, 21)]).unwrap();
    drop(store);
    let store = LogStore::open(dir.path()).unwrap();
    assert_eq!(indexes(&store), vec![(3, 21)]);
    assert_eq!(store.lock().purged.map(|p| p.index), Some(20));
}

#[test]
fn a_gap_in_the_log_is_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    store.write_entries([entry(1, 0), entry(1, 1)]).unwrap();
    drop(store);
    let mut bytes = std::fs::read(dir.path().join(LOG_FILE)).unwrap();
    let json = serde_json::to_vec(&entry(1, 5)).unwrap();
    bytes.extend_from_slice(&file_frame::encode(KIND_ENTRY, &json));
    std::fs::write(dir.path().join(LOG_FILE), bytes).unwrap();
    assert!(matches!(
        LogStore::open(dir.path()),
        Err(ControllerError::Corrupt { .. })
    ));
}

#[test]
fn the_vote_survives_reopen_and_a_damaged_state_file_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    {
        let mut inner = store.lock();
        inner.state.vote = Some(Vote::new(7, 2));
        save_state(&inner).unwrap();
    }
    drop(store);
    let store = LogStore::open(dir.path()).unwrap();
    assert_eq!(store.lock().state.vote, Some(Vote::new(7, 2)));
    drop(store);
    let path = dir.path().join(STATE_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    assert!(matches!(
        LogStore::open(dir.path()),
        Err(ControllerError::Corrupt { .. })
    ));
}
