//! A byte range of a segment file, handed to the server for sendfile or pread.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Whole batches at `[position, position + len)` of `file`. The `Arc` keeps the data
/// readable even if the segment is deleted meanwhile.
#[derive(Debug, Clone)]
pub struct FileSlice {
    /// The segment's log file.
    pub file: Arc<File>,
    /// Byte position of the first batch.
    pub position: u64,
    /// Length in bytes (a whole number of batches).
    pub len: u64,
}

impl FileSlice {
    /// Reads exactly `len` bytes with pread.
    pub fn read_to_vec(&self) -> std::io::Result<Vec<u8>> {
        let len = usize::try_from(self.len)
            .map_err(|_| std::io::Error::other("slice too large for memory"))?;
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf)
    }
}
