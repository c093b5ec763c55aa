//! The idempotent producer's rules, checked under the partition lock right before an
//! append: a retried batch that was already written is answered with its original
//! offset instead of being written twice; a gap in the sequence, a stale epoch, or a
//! producer the log no longer remembers is refused. The log keeps the last five batches
//! per producer (`tidelog_storage::ProducerStateTable`), as Kafka does, so up to five
//! in-flight requests can be retried safely.

use kafka_protocol::error::ResponseError;
use tidelog_storage::{BatchHeader, ProducerStateTable, StorageError, BATCH_HEADER_LEN};

#[derive(Debug, thiserror::Error)]
pub(crate) enum SequenceError {
    #[error("producer {producer_id}: expected sequence {expected}, got {got}")]
    OutOfOrder {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    #[error("producer {producer_id}: epoch {got} is older than {current}")]
    StaleEpoch {
        producer_id: i64,
        current: i16,
        got: i16,
    },
    #[error("producer {producer_id} is unknown here (its state expired); sequence {got} is not 0")]
    UnknownProducer { producer_id: i64, got: i32 },
}

impl SequenceError {
    pub(crate) fn code(&self) -> i16 {
        match self {
            SequenceError::OutOfOrder { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
            SequenceError::StaleEpoch { .. } => ResponseError::InvalidProducerEpoch.code(),
            SequenceError::UnknownProducer { .. } => ResponseError::UnknownProducerId.code(),
        }
    }
}

/// What to do with a produced set of batches.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SequenceCheck {
    /// Write them.
    Append,
    /// Already written: answer with this base offset and write nothing.
    Duplicate { first_offset: i64 },
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

/// Checks every batch of a produce request against the producers' remembered state.
pub(crate) fn check(
    table: &ProducerStateTable,
    batches: &[u8],
) -> Result<SequenceCheck, CheckError> {
    let mut pos = 0usize;
    let mut duplicate: Option<i64> = None;
    let mut fresh = 0usize;
    // Batches earlier in this same request move the expected sequence along.
    let mut pending: Vec<(i64, i16, i32)> = Vec::new();
    while pos + BATCH_HEADER_LEN <= batches.len() {
        let h = BatchHeader::new(&batches[pos..]).map_err(StorageError::from)?;
        let size = h
            .total_size()
            .ok_or_else(|| StorageError::CorruptMessage("bad batch length".into()))?;
        pos = pos.saturating_add(size);
        let producer_id = h.producer_id();
        if producer_id < 0 || h.base_sequence() < 0 {
            fresh += 1;
            continue;
        }
        let (epoch, first, last) = (h.producer_epoch(), h.base_sequence(), h.last_sequence());
        let earlier = pending
            .iter()
            .rev()
            .find(|(pid, _, _)| *pid == producer_id)
            .copied();
        let remembered = table.get(producer_id);
        let (current_epoch, last_seq) = match (earlier, remembered) {
            (Some((_, e, s)), _) => (Some(e), Some(s)),
            (None, Some(entry)) => (Some(entry.epoch), entry.last_seq()),
            (None, None) => (None, None),
        };
        match current_epoch {
            Some(current) if epoch < current => {
                return Err(SequenceError::StaleEpoch {
                    producer_id,
                    current,
                    got: epoch,
                }
                .into());
            }
            Some(current) if epoch == current => {
                if earlier.is_none() {
                    if let Some(found) = remembered.and_then(|e| e.find_duplicate(first, last)) {
                        duplicate.get_or_insert(found.first_offset);
                        continue;
                    }
                }
                let expected = last_seq.map_or(0, next_sequence);
                if first != expected {
                    return Err(SequenceError::OutOfOrder {
                        producer_id,
                        expected,
                        got: first,
                    }
                    .into());
                }
            }
            // A new epoch (or a producer we have no state for) starts again at sequence 0.
            Some(_) if first != 0 => {
                return Err(SequenceError::OutOfOrder {
                    producer_id,
                    expected: 0,
                    got: first,
                }
                .into());
            }
            None if first != 0 => {
                return Err(SequenceError::UnknownProducer {
                    producer_id,
                    got: first,
                }
                .into());
            }
            _ => {}
        }
        fresh += 1;
        pending.push((producer_id, epoch, last));
    }
    match duplicate {
        Some(first_offset) if fresh == 0 => Ok(SequenceCheck::Duplicate { first_offset }),
        // Part retried, part new: the producer never sends that, so refuse it whole.
        Some(_) => Err(CheckError::Sequence(SequenceError::OutOfOrder {
            producer_id: -1,
            expected: -1,
            got: -1,
        })),
        None => Ok(SequenceCheck::Append),
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_storage::{AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig, RecordSpec};

    fn batch(producer_id: i64, epoch: i16, first_seq: i32, count: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new().producer(producer_id, epoch, first_seq);
        for i in 0..count {
            builder = builder.record(RecordSpec {
                key: Some(format!("k{i}").into_bytes()),
                value: Some(b"v".to_vec()),
                timestamp: 1000 + i as i64,
                headers: Vec::new(),
            });
        }
        builder.build().unwrap()
    }

    fn log_with(batches: &[Vec<u8>]) -> (tempfile::TempDir, Log) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(&dir.path().join("t-0"), LogConfig::default()).unwrap();
        let opts = AppendOptions {
            leader_epoch: 0,
            now_ms: 1000,
            origin: AppendOrigin::Client,
        };
        for b in batches {
            log.append(&mut b.clone(), &opts).unwrap();
        }
        (dir, log)
    }

    #[test]
    fn retried_batch_is_a_duplicate_with_its_original_offset() {
        let first = batch(7, 0, 0, 3);
        let second = batch(7, 0, 3, 2);
        let (_dir, log) = log_with(&[first.clone(), second.clone()]);
        assert_eq!(
            check(log.producer_state(), &second).unwrap(),
            SequenceCheck::Duplicate { first_offset: 3 }
        );
        assert_eq!(
            check(log.producer_state(), &first).unwrap(),
            SequenceCheck::Duplicate { first_offset: 0 }
        );
        assert_eq!(
            check(log.producer_state(), &batch(7, 0, 5, 1)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn gaps_stale_epochs_and_unknown_producers_are_refused() {
        let (_dir, log) = log_with(&[batch(7, 1, 0, 3)]);
        let table = log.producer_state();
        assert!(matches!(
            check(table, &batch(7, 1, 5, 1)),
            Err(CheckError::Sequence(SequenceError::OutOfOrder {
                expected: 3,
                ..
            }))
        ));
        assert!(matches!(
            check(table, &batch(7, 0, 3, 1)),
            Err(CheckError::Sequence(SequenceError::StaleEpoch { .. }))
        ));
        assert!(matches!(
            check(table, &batch(9, 0, 4, 1)),
            Err(CheckError::Sequence(SequenceError::UnknownProducer { .. }))
        ));
        assert_eq!(
            check(table, &batch(9, 0, 0, 1)).unwrap(),
            SequenceCheck::Append
        );
        assert_eq!(
            check(table, &batch(7, 2, 0, 1)).unwrap(),
            SequenceCheck::Append
        );
        assert!(matches!(
            check(table, &batch(7, 2, 1, 1)),
            Err(CheckError::Sequence(SequenceError::OutOfOrder {
                expected: 0,
                ..
            }))
        ));
    }

    #[test]
    fn non_idempotent_batches_pass() {
        let (_dir, log) = log_with(&[]);
        assert_eq!(
            check(log.producer_state(), &batch(-1, -1, -1, 2)).unwrap(),
            SequenceCheck::Append
        );
    }
}
