//! tidelog-records: Kafka RecordBatch v2, the record format of the wire and of the log.
//!
//! One codec for the whole workspace, free of I/O (no files, no sockets, no runtime):
//!
//! * [`BatchHeader`] — a zero-copy view of the 61-byte batch header (its byte layout is
//!   documented in the `header` module), [`BatchHeaderMut`] for the fields the log
//!   stamps, [`check_batch`] for the framing and CRC-32C, [`assemble_batch`] to write a
//!   header around encoded records.
//! * [`RecordIter`] / [`Record`] — zero-copy views of the records of a records block:
//!   key, value, and headers in order with repeated keys kept.
//! * [`records_block`] / [`decompressing_reader`] — gzip, snappy (xerial or raw), LZ4
//!   and zstd decompression that never produces more than a given limit; [`compress`].
//! * [`BatchBuilder`] — plain or compressed batches, idempotent / transactional
//!   producer fields, control markers, LogAppendTime.
//! * [`validate`] — every record of a produced batch parsed and checked before it is
//!   stored, with the Kafka error each failure stands for.
//! * [`LogRecords`] — the records of a buffer of stored batches with offsets, producer
//!   and transaction markers, for replaying internal topics.
//!
//! ```
//! use tidelog_records::{BatchBuilder, BatchHeader, Codec, RecordIter, records_block};
//!
//! let mut builder = BatchBuilder::new().compression(Codec::Zstd);
//! builder.push(1_000, Some(b"k"), Some(b"v"), &[("h", Some("1")), ("h", Some("2"))]);
//! let batch = builder.encode()?;
//! let header = BatchHeader::new(&batch)?;
//! let block = records_block(&batch, 1 << 20)?;
//! let record = RecordIter::new(&block, header.record_count()).next().unwrap()?;
//! assert_eq!(record.value, Some(&b"v"[..]));
//! assert_eq!(record.headers().filter(|h| h.key == b"h").count(), 2);
//! # Ok::<(), tidelog_records::RecordsError>(())
//! ```

mod builder;
mod compression;
mod error;
mod header;
mod log_reader;
mod record;
mod validate;
mod varint;

pub use builder::{BatchBuilder, RecordSpec};
pub use compression::{compress, decompressing_reader, read_error, records_block};
pub use error::{RecordError, RecordsError};
pub use header::{
    assemble_batch, attributes_without_codec, check_batch, compute_crc, BatchFields, BatchHeader,
    BatchHeaderMut, Codec, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
};
pub use log_reader::{
    batch_control_marker, batch_transaction_marker, BatchReadError, ControlMarker, LogRecord,
    LogRecords, DEFAULT_REPLAY_INFLATE_LIMIT,
};
pub use record::{Headers, Record, RecordHeader, RecordIter};
pub use validate::{
    max_inflated_bytes, validate, Rules, TimestampWindow, INFLATE_CEILING, INFLATE_FACTOR,
    INFLATE_FLOOR,
};
pub use varint::put_varlong;

#[cfg(test)]
mod tests;
