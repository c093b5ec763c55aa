//! The log's side of the RecordBatch v2 codec (`tidelog-records`): splitting an append
//! into checked batches under `max.message.bytes`, and the codec's errors as storage
//! errors. The byte layout itself is documented on [`tidelog_records::BatchHeader`].

pub(crate) use tidelog_records::{BatchHeader, BatchHeaderMut, BATCH_HEADER_LEN};
use tidelog_records::{RecordsError, INFLATE_CEILING};

use crate::error::{RecordRefusal, StorageError};

/// Largest decompressed records block a reader of stored batches materialises: every
/// compressed batch the log accepted inflates to at most this.
pub(crate) const MAX_DECOMPRESSED: usize = INFLATE_CEILING;

impl From<RecordsError> for StorageError {
    fn from(e: RecordsError) -> Self {
        match e {
            RecordsError::Corrupt(why) => StorageError::CorruptMessage(why),
            RecordsError::Invalid {
                message,
                record_errors,
            } => StorageError::InvalidRecord(RecordRefusal {
                message,
                record_errors,
            }),
            RecordsError::InvalidTimestamp {
                message,
                record_errors,
            } => StorageError::InvalidTimestamp(RecordRefusal {
                message,
                record_errors,
            }),
            RecordsError::InflatedTooLarge { limit } => {
                StorageError::DecompressedTooLarge { limit }
            }
            RecordsError::Unencodable(why) => StorageError::InvalidArgument(why),
        }
    }
}

/// Checks one whole batch at the start of `buf` and returns its size: enough bytes for the
/// declared length, size within `max_size`, then the codec's framing checks (magic 2,
/// known codec, CRC-32C).
pub(crate) fn check_batch(buf: &[u8], max_size: u32) -> Result<usize, StorageError> {
    let header = BatchHeader::new(buf)?;
    let size = header.total_size().ok_or_else(|| {
        StorageError::corrupt(format!("bad batch length {}", header.batch_length()))
    })?;
    if size > max_size as usize {
        return Err(StorageError::MessageTooLarge {
            size,
            max: max_size,
        });
    }
    Ok(tidelog_records::check_batch(buf)?)
}

/// Splits concatenated batches into `(start, len)` ranges, checking each with
/// [`check_batch`]. Fails on the first bad batch or trailing partial bytes.
pub(crate) fn split_batches(
    buf: &[u8],
    max_size: u32,
) -> Result<Vec<(usize, usize)>, StorageError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let size = check_batch(&buf[pos..], max_size)?;
        out.push((pos, size));
        pos += size;
    }
    if out.is_empty() {
        return Err(StorageError::corrupt("no record batch in append"));
    }
    Ok(out)
}
