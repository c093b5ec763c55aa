//! Small crash-safe file helpers shared by the snapshot and `meta.properties` writers.

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use crate::error::ControllerError;

/// Suffix of files being written; leftovers from a crash are removed at open.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Makes directory entries (creates, renames, deletes) in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ControllerError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ControllerError::io(dir, e))
}

/// Replaces `dir/name` with `bytes` so that after a crash the file holds either the old
/// or the new content in full: write a temp file, fsync it, rename over, fsync the dir.
pub(crate) fn write_atomically(
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), ControllerError> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let target = dir.join(name);
    let mut file = File::create(&tmp).map_err(|e| ControllerError::io(&tmp, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ControllerError::io(&tmp, e))?;
    drop(file);
    fs::rename(&tmp, &target).map_err(|e| ControllerError::io(&target, e))?;
    sync_dir(dir)
}

/// Reads a whole small file, refusing anything larger than `limit` bytes before
/// allocating for it. `Ok(None)` when the file does not exist.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, ControllerError> {
    let len = match fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ControllerError::io(path, e)),
    };
    if len > limit {
        return Err(ControllerError::corrupt(
            path,
            format!("{len} bytes exceeds the limit of {limit}"),
        ));
    }
    fs::read(path)
        .map(Some)
        .map_err(|e| ControllerError::io(path, e))
}

/// Like `read_exact`, but reports how many bytes were read before end of file.
pub(crate) fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
