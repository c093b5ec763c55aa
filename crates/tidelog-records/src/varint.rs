//! Zig-zag variable-length integers as records use them, and a bounded byte cursor.

use crate::error::RecordsError;

/// Longest varlong encoding (64 bits in 7-bit groups).
pub(crate) const MAX_VARLONG_LEN: usize = 10;

/// Appends `v` zig-zag encoded.
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Undoes the zig-zag mapping of an accumulated unsigned value.
pub(crate) fn unzigzag(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}

/// Reads fields front to back from a slice; every read is checked against the end.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn u8(&mut self) -> Result<u8, RecordsError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| RecordsError::corrupt("record ends inside a field"))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn varlong(&mut self) -> Result<i64, RecordsError> {
        let mut raw: u64 = 0;
        for i in 0..MAX_VARLONG_LEN {
            let byte = self
                .u8()
                .map_err(|_| RecordsError::corrupt("truncated varint"))?;
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(unzigzag(raw));
            }
        }
        Err(RecordsError::corrupt("varint longer than 10 bytes"))
    }

    pub(crate) fn varint(&mut self) -> Result<i32, RecordsError> {
        i32::try_from(self.varlong()?).map_err(|_| RecordsError::corrupt("varint overflows i32"))
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], RecordsError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                RecordsError::corrupt(format!(
                    "field of {len} bytes runs past the {} bytes left",
                    self.remaining()
                ))
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// A varint length then that many bytes; -1 is null, anything below is corrupt.
    pub(crate) fn nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, RecordsError> {
        match self.varint()? {
            -1 => Ok(None),
            len if len < -1 => Err(RecordsError::corrupt(format!("{what} length {len}"))),
            len => self.take(len as usize).map(Some),
        }
    }
}
