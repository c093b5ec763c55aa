//! Unit tests of the raft log files: append, truncate, purge, reopen, damage.

use openraft::storage::RaftLogStorageExt;
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

/// The synchronous forms the unit tests drive the store with (no runtime).
impl LogStore {
    fn write_entries(&self, entries: impl IntoIterator<Item = Entry>) -> Result<(), String> {
        let frames = self.stage_append(entries).map_err(|e| e.to_string())?;
        self.writer.run_blocking(Op::Append(frames))
    }

    fn truncate_from(&self, index: u64) -> Result<(), String> {
        match self.stage_truncate(index) {
            Some(len) => self.writer.run_blocking(Op::Truncate(len)),
            None => Ok(()),
        }
    }

    fn purge_upto(&self, log_id: LogId) -> Result<(), String> {
        match self.stage_purge(log_id).map_err(|e| e.to_string())? {
            Some(bytes) => self.writer.run_blocking(Op::Rewrite(bytes)),
            None => Ok(()),
        }
    }

    fn save_vote_blocking(&self, vote: Vote) -> Result<(), String> {
        let bytes = {
            let mut inner = self.lock();
            inner.state.vote = Some(vote);
            encode_state(&inner.state).map_err(|e| e.to_string())?
        };
        self.writer.run_blocking(Op::SaveState(bytes))
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
    store.save_vote_blocking(Vote::new(7, 2)).unwrap();
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

// The held lock pauses the writer thread, which no task here waits on.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "current_thread")]
async fn an_append_is_readable_at_once_and_reported_durable_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path()).unwrap();
    let mut reader = store.get_log_reader().await;
    let gate = std::sync::Arc::clone(&store.writer.gate);
    let paused = gate.lock().unwrap();
    // The writer thread cannot write: the append must still return, the entries must
    // be readable, and only the durability report waits.
    let appending = tokio::spawn(async move {
        store
            .blocking_append((0..3).map(|i| entry(1, i)))
            .await
            .map(|()| store)
    });
    let mut readable = Vec::new();
    for _ in 0..1000 {
        readable = reader.try_get_log_entries(0..3).await.unwrap();
        if readable.len() == 3 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        readable.len(),
        3,
        "appended entries are readable before the fsync"
    );
    assert!(
        !appending.is_finished(),
        "durability was reported before the write"
    );
    drop(paused);
    let store = appending.await.unwrap().unwrap();
    let writer = store.writer_thread();
    drop(store);
    writer.join();
    let reopened = LogStore::open(dir.path()).unwrap();
    assert_eq!(indexes(&reopened), vec![(1, 0), (1, 1), (1, 2)]);
}

#[tokio::test(flavor = "current_thread")]
async fn writes_reach_the_file_in_the_order_openraft_made_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path()).unwrap();
    store.save_vote(&Vote::new(3, 1)).await.unwrap();
    store
        .blocking_append((0..6).map(|i| entry(1, i)))
        .await
        .unwrap();
    store
        .truncate(LogId::new(CommittedLeaderId::new(1, 1), 4))
        .await
        .unwrap();
    store
        .blocking_append((4..8).map(|i| entry(3, i)))
        .await
        .unwrap();
    store
        .purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
        .await
        .unwrap();
    store
        .save_committed(Some(LogId::new(CommittedLeaderId::new(3, 1), 5)))
        .await
        .unwrap();
    let writer = store.writer_thread();
    drop(store);
    writer.join();
    let reopened = LogStore::open(dir.path()).unwrap();
    let want: Vec<(u64, u64)> = (2..4)
        .map(|i| (1, i))
        .chain((4..8).map(|i| (3, i)))
        .collect();
    assert_eq!(indexes(&reopened), want);
    let inner = reopened.lock();
    assert_eq!(inner.state.vote, Some(Vote::new(3, 1)));
    assert_eq!(inner.state.committed.map(|c| c.index), Some(5));
    assert_eq!(inner.purged.map(|p| p.index), Some(1));
}
