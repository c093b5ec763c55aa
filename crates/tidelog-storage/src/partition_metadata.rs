//! `partition.metadata`: which topic a partition directory belongs to.
//!
//! Directories are named `<topic>-<partition>`, and a name outlives its topic: a topic
//! deleted while a node was away, or a data directory started against other metadata,
//! leaves a directory that a new topic of the same name would find. The file pins the
//! directory to one topic id, so a directory of another topic is never served.
//!
//! # Format
//! Kafka's, byte for byte: two lines of UTF-8 text, no trailing newline,
//! ```text
//! version: 0
//! topic_id: <topic id: its 16 bytes as unpadded URL-safe base64, 22 characters>
//! ```
//! Nothing is checksummed; the file is written to `partition.metadata.tmp`, fsynced,
//! renamed over the name and the directory fsynced, so a reader sees the old file, the new
//! one, or none — never a torn one. A leftover `.tmp` (a crash before the rename) is
//! ignored and overwritten by the next write.
//!
//! # The rules ([`claim_partition_dir`])
//! * no directory: it is created with the file (the file first, then the segments);
//! * the file names this topic: the directory is served;
//! * no file (a directory of an earlier tidelog release, which wrote none): adopted — the
//!   topic id is written and the directory served;
//! * the file names another topic: the directory is renamed aside to
//!   `<topic>-<partition>.<32 hex digits>-delete` (Kafka's name for a directory awaiting
//!   deletion) and a fresh one is created; deleting the renamed one is the caller's job;
//! * a file that cannot be read or parsed: an error, and the directory is left alone
//!   (neither served nor deleted) for an operator to look at.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

use crate::checkpoint;
use crate::error::StorageError;

/// The file's name inside a partition directory.
pub const PARTITION_METADATA: &str = "partition.metadata";
/// The suffix of a directory renamed aside to be deleted.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// The only version there is.
const VERSION: u32 = 0;
/// Longest file name Linux file systems accept; a renamed directory stays within it.
const MAX_FILE_NAME_BYTES: usize = 255;

/// What [`claim_partition_dir`] found in a partition directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirClaim {
    /// There was none; it was created, holding this topic's id.
    Created,
    /// Its `partition.metadata` names this topic.
    Owned,
    /// It had no `partition.metadata` (an earlier release); this topic's id was written.
    Adopted,
    /// Its `partition.metadata` named `found`: it was renamed to `moved_to`, and a fresh
    /// directory holding this topic's id was created in its place.
    Replaced { found: Uuid, moved_to: PathBuf },
}

/// The file's text for `topic_id`.
pub(crate) fn encode(topic_id: Uuid) -> String {
    format!(
        "version: {VERSION}\ntopic_id: {}",
        URL_SAFE_NO_PAD.encode(topic_id.as_bytes())
    )
}

/// The topic id in the file's text; the reason when it is not a version-0 file.
pub(crate) fn decode(text: &str) -> Result<Uuid, String> {
    let mut lines = text.lines();
    let version = field(lines.next(), "version")?;
    if version != VERSION.to_string() {
        return Err(format!("unsupported version {version}"));
    }
    let encoded = field(lines.next(), "topic_id")?;
    let bytes = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|e| format!("topic_id {encoded} is not base64: {e}"))?;
    let id = Uuid::from_slice(&bytes).map_err(|_| format!("topic_id {encoded} is not 16 bytes"))?;
    if lines.any(|l| !l.trim().is_empty()) {
        return Err("unexpected text after topic_id".to_owned());
    }
    Ok(id)
}

/// The value of a `name: value` line (Kafka's reader splits at a colon and whitespace).
fn field<'a>(line: Option<&'a str>, name: &str) -> Result<&'a str, String> {
    let line = line.ok_or_else(|| format!("missing {name} line"))?;
    line.split_once(':')
        .filter(|(key, _)| key.trim() == name)
        .map(|(_, value)| value.trim())
        .ok_or_else(|| format!("expected `{name}: ...`, found `{line}`"))
}

/// The topic id `dir` holds; `None` when it has no `partition.metadata`.
pub fn read_topic_id(dir: &Path) -> Result<Option<Uuid>, StorageError> {
    let path = dir.join(PARTITION_METADATA);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    decode(&text)
        .map(Some)
        .map_err(|reason| StorageError::PartitionMetadata { path, reason })
}

/// Writes `topic_id` into `dir` crash-safely (see the module doc).
pub fn write_topic_id(dir: &Path, topic_id: Uuid) -> Result<(), StorageError> {
    checkpoint::write_atomic(dir, PARTITION_METADATA, encode(topic_id).as_bytes())?;
    Ok(())
}

/// Makes `dir` a directory of `topic_id` by the rules of the module doc.
pub fn claim_partition_dir(dir: &Path, topic_id: Uuid) -> Result<DirClaim, StorageError> {
    if !dir.is_dir() {
        create_with_id(dir, topic_id)?;
        return Ok(DirClaim::Created);
    }
    match read_topic_id(dir)? {
        Some(found) if found == topic_id => Ok(DirClaim::Owned),
        Some(found) => {
            let moved_to = rename_for_deletion(dir)?;
            create_with_id(dir, topic_id)?;
            Ok(DirClaim::Replaced { found, moved_to })
        }
        None => {
            write_topic_id(dir, topic_id)?;
            Ok(DirClaim::Adopted)
        }
    }
}

/// Creates `dir` holding `topic_id`, durably (the new entry in its parent fsynced).
fn create_with_id(dir: &Path, topic_id: Uuid) -> Result<(), StorageError> {
    std::fs::create_dir_all(dir)?;
    write_topic_id(dir, topic_id)?;
    sync_parent(dir)
}

/// Renames `dir` to `<name>.<32 hex digits>-delete` beside it, durably, and returns the
/// new path. Readers must not hold files of it open for writing.
pub fn rename_for_deletion(dir: &Path) -> Result<PathBuf, StorageError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| StorageError::InvalidArgument(format!("{} has no name", dir.display())))?;
    let moved_to = dir.with_file_name(delete_dir_name(name, Uuid::new_v4()));
    std::fs::rename(dir, &moved_to)?;
    sync_parent(&moved_to)?;
    Ok(moved_to)
}

/// `<name>.<unique>-delete`, the name cut short (as Kafka does) so the whole stays a
/// legal file name. Partition directory names are ASCII, so any cut is a char boundary.
fn delete_dir_name(name: &str, unique: Uuid) -> String {
    let tail = format!(".{}{DELETE_DIR_SUFFIX}", unique.simple());
    let keep = name
        .len()
        .min(MAX_FILE_NAME_BYTES.saturating_sub(tail.len()));
    let head = name.get(..keep).unwrap_or(name);
    format!("{head}{tail}")
}

/// Whether a directory name is one [`rename_for_deletion`] gave.
pub fn is_delete_dir_name(name: &str) -> bool {
    name.strip_suffix(DELETE_DIR_SUFFIX)
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(head, unique)| {
            !head.is_empty() && unique.len() == 32 && unique.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

fn sync_parent(path: &Path) -> Result<(), StorageError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        checkpoint::sync_dir(parent)?;
    }
    Ok(())
}
