//! `<base>.txnindex`: aborted transactions whose abort marker lies in this segment.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// One aborted transaction, as a `read_committed` fetch needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// Producer whose transaction aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch.
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
    /// Last stable offset when the marker was written.
    pub last_stable_offset: i64,
}

/// Entry layout: 34 bytes, big-endian: `version i16 (0), producer_id i64, first_offset i64,
/// last_offset i64, last_stable_offset i64`, appended in marker order. Not checksummed;
/// a trailing partial entry or an unknown version ends the file on load (the rest is
/// discarded) and entries at or past a truncation point are dropped with the log.
pub(crate) struct TxnIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
}

const ENTRY: usize = 34;

impl TxnIndex {
    /// The index of a segment whose directory holds no such file (a new segment, or
    /// one without aborted transactions): nothing to open.
    pub(crate) fn empty(path: &Path) -> Self {
        TxnIndex {
            path: path.to_path_buf(),
            entries: Vec::new(),
        }
    }

    /// Loads the file if present (a missing file means no aborted transactions).
    pub(crate) fn load(path: &Path) -> io::Result<Self> {
        let mut entries = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes)?;
                for e in bytes.chunks_exact(ENTRY) {
                    if e[..2] != [0, 0] {
                        break;
                    }
                    let at = |i: usize| {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(&e[i..i + 8]);
                        i64::from_be_bytes(a)
                    };
                    entries.push(AbortedTxn {
                        producer_id: at(2),
                        first_offset: at(10),
                        last_offset: at(18),
                        last_stable_offset: at(26),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(TxnIndex {
            path: path.to_path_buf(),
            entries,
        })
    }

    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(&encode(&txn))?;
        self.entries.push(txn);
        Ok(())
    }

    /// Keeps only transactions whose marker is below `offset`; rewrites the file.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|t| t.last_offset < offset);
        if self.entries.len() != before {
            self.rewrite()?;
        }
        Ok(())
    }

    fn rewrite(&self) -> io::Result<()> {
        if self.entries.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let bytes: Vec<u8> = self.entries.iter().flat_map(encode).collect();
        std::fs::write(&self.path, bytes)
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        if self.entries.is_empty() {
            // Nothing was appended to it (an emptied file was removed instead).
            return Ok(());
        }
        match File::open(&self.path) {
            Ok(f) => crate::fsync::sync_all(&f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn encode(t: &AbortedTxn) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[2..10].copy_from_slice(&t.producer_id.to_be_bytes());
    e[10..18].copy_from_slice(&t.first_offset.to_be_bytes());
    e[18..26].copy_from_slice(&t.last_offset.to_be_bytes());
    e[26..34].copy_from_slice(&t.last_stable_offset.to_be_bytes());
    e
}
