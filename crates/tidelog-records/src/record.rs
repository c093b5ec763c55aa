//! Records inside a batch's (decompressed) records block, as zero-copy views.
//!
//! ```text
//! length          varint   bytes after this field
//! attributes      i8       unused in v2
//! timestampDelta  varlong  against the batch's baseTimestamp
//! offsetDelta     varint   against the batch's baseOffset: 0, 1, 2, ... as written
//! keyLength       varint   -1 = null key
//! key             bytes
//! valueLength     varint   -1 = null value (a tombstone)
//! value           bytes
//! headerCount     varint
//! headers         headerKeyLength varint (never null), headerKey,
//!                 headerValueLength varint (-1 = null), headerValue; keys may repeat
//! ```
//! Every varint is zig-zag encoded. A record's fields are read within its own declared
//! length only, and must fill it exactly.

use crate::error::RecordsError;
use crate::varint::Cursor;

/// One record, borrowing from the records block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's attribute byte (unused by format v2, kept as written).
    pub attributes: i8,
    /// Added to the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Added to the batch's base offset.
    pub offset_delta: i32,
    /// The key; `None` is null.
    pub key: Option<&'a [u8]>,
    /// The value; `None` is null.
    pub value: Option<&'a [u8]>,
    header_count: usize,
    header_bytes: &'a [u8],
    /// The whole encoded record including its length prefix.
    pub raw: &'a [u8],
}

/// One record header; several may share a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader<'a> {
    /// The header's key (never null).
    pub key: &'a [u8],
    /// The header's value; `None` is null.
    pub value: Option<&'a [u8]>,
}

impl<'a> Record<'a> {
    /// Number of headers.
    pub fn header_count(&self) -> usize {
        self.header_count
    }

    /// The headers in the order written, repeated keys included.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            cursor: Cursor::new(self.header_bytes),
            left: self.header_count,
        }
    }

    /// Parses one record at the start of `block`; returns it and the bytes it took.
    pub(crate) fn parse(block: &'a [u8]) -> Result<(Record<'a>, usize), RecordsError> {
        let mut outer = Cursor::new(block);
        let length = outer.varint()?;
        let length = usize::try_from(length)
            .map_err(|_| RecordsError::corrupt(format!("record length {length}")))?;
        let prefix = outer.position();
        let body = outer.take(length).map_err(|_| {
            RecordsError::corrupt(format!(
                "record length {length} runs past the {} bytes left",
                block.len() - prefix
            ))
        })?;
        let end = prefix + length;
        let record = Record::parse_body(body, &block[..end])?;
        Ok((record, end))
    }

    /// Parses a record body (everything after the length prefix); `raw` is the whole
    /// encoded record the view reports.
    pub(crate) fn parse_body(body: &'a [u8], raw: &'a [u8]) -> Result<Record<'a>, RecordsError> {
        let mut c = Cursor::new(body);
        let attributes = i8::from_be_bytes([c.u8()?]);
        let timestamp_delta = c.varlong()?;
        let offset_delta = c.varint()?;
        let key = c.nullable_bytes("key")?;
        let value = c.nullable_bytes("value")?;
        let header_count = c.varint()?;
        let header_count = usize::try_from(header_count)
            .map_err(|_| RecordsError::corrupt(format!("header count {header_count}")))?;
        // A header takes at least two bytes: a bound before walking a hostile count.
        if header_count > c.remaining() / 2 {
            return Err(RecordsError::corrupt(format!(
                "header count {header_count} cannot fit in the {} bytes left",
                c.remaining()
            )));
        }
        let headers_start = c.position();
        for _ in 0..header_count {
            if c.nullable_bytes("header key")?.is_none() {
                return Err(RecordsError::corrupt("null header key"));
            }
            c.nullable_bytes("header value")?;
        }
        let header_bytes = &body[headers_start..c.position()];
        if c.remaining() != 0 {
            return Err(RecordsError::corrupt(format!(
                "{} bytes of the record are not part of any field",
                c.remaining()
            )));
        }
        Ok(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            header_count,
            header_bytes,
            raw,
        })
    }
}

/// Iterator over a record's headers (already checked when the record was parsed).
#[derive(Clone)]
pub struct Headers<'a> {
    cursor: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for Headers<'a> {
    type Item = RecordHeader<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Parsing the record walked these exact bytes, so neither read can fail; a
        // failure would end the iteration rather than panic.
        let key = self.cursor.nullable_bytes("header key").ok().flatten()?;
        let value = self.cursor.nullable_bytes("header value").ok()?;
        Some(RecordHeader { key, value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Iterates exactly `count` records of a records block, stopping at the first
/// malformed one (which it yields as an error).
pub struct RecordIter<'a> {
    block: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> RecordIter<'a> {
    /// The records of `block`, of which the batch header declares `count` (a negative
    /// count yields nothing).
    pub fn new(block: &'a [u8], count: i32) -> Self {
        RecordIter {
            block,
            pos: 0,
            remaining: usize::try_from(count).unwrap_or(0),
        }
    }

    /// Bytes of the block after the records read so far; non-zero once all declared
    /// records are read means the block holds more than the header declares.
    pub fn trailing_bytes(&self) -> usize {
        self.block.len() - self.pos
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        match Record::parse(&self.block[self.pos..]) {
            Ok((record, used)) => {
                self.pos += used;
                Some(Ok(record))
            }
            Err(e) => {
                self.remaining = 0;
                Some(Err(e))
            }
        }
    }
}
