//! The log's checks around the codec's: `max.message.bytes` and splitting an append.
//! The header, CRC and record tests live with the codec in `tidelog-records`.

use crate::batch::{check_batch, split_batches};
use crate::error::StorageError;
use crate::BatchBuilder;

/// One record, key "k", value "v": 70 bytes.
fn one_record() -> Vec<u8> {
    BatchBuilder::new()
        .kv(Some(b"k"), Some(b"v"), 1_700_000_000_000)
        .build()
        .unwrap()
}

#[test]
fn structural_errors_are_distinct() {
    let b = one_record();
    assert_eq!(b.len(), 70);
    assert_eq!(check_batch(&b, 1000).unwrap(), 70);
    assert!(matches!(
        check_batch(&b, 69),
        Err(StorageError::MessageTooLarge { size: 70, max: 69 })
    ));
    assert!(matches!(
        check_batch(&b[..69], 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    assert!(matches!(
        check_batch(&b[..60], 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut m = b.clone();
    m[16] = 1;
    assert!(matches!(
        check_batch(&m, 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut neg = b.clone();
    neg[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        check_batch(&neg, 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut flipped = b.clone();
    flipped[69] ^= 1;
    assert!(matches!(
        check_batch(&flipped, 1000),
        Err(StorageError::CorruptMessage(_))
    ));
    let mut two = b.clone();
    two.extend_from_slice(&b);
    assert_eq!(split_batches(&two, 1000).unwrap(), vec![(0, 70), (70, 70)]);
    two.push(0);
    assert!(split_batches(&two, 1000).is_err());
    assert!(split_batches(&[], 1000).is_err());
}
