//! The metadata log a single node kept on local disk before every node ran the Raft
//! controller (releases up to 5966dcc). Only read now, once, to migrate it (see
//! `legacy`); the writer is kept for the tests that build such a log.
//!
//! Directory `<data-dir>/__cluster_metadata/` holds:
//! - `meta.properties`: the cluster id (see `meta_properties`).
//! - `metadata.snapshot`: the image at some offset S (see `snapshot`), optional.
//! - segments `<base offset, 20 digits>.log`: frames (see `frame`) with contiguous
//!   offsets; the last segment is the one appended to. A new segment starts only when a
//!   snapshot is taken, and segments whose records are all covered by the snapshot are
//!   deleted then.
//!
//! Recovery (`open`): load the snapshot, then read every segment in order, replaying
//! records above S. A torn or checksum-failing frame in the LAST segment is a crash
//! during append: the file is cut there (nothing after it was ever acknowledged, since
//! `append` fsyncs before returning). Damage anywhere else is an error.

use std::fs::{self, File, OpenOptions};
use std::io::BufReader;
#[cfg(test)]
use std::io::Write;
use std::path::{Path, PathBuf};

use super::frame::{self, FrameError, FrameRead};
use crate::durable::{sync_dir, TMP_SUFFIX};
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::meta_properties::load_or_create_cluster_id;
#[cfg(test)]
use crate::record::MetadataRecord;
use crate::snapshot;

pub(super) const SEGMENT_SUFFIX: &str = ".log";

/// The metadata log; see the module docs for the files and the recovery rules.
#[derive(Debug)]
// Only the tests write a legacy log, so outside them most fields are never read again.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct MetadataLog {
    dir: PathBuf,
    cluster_id: String,
    /// Base offsets of all segments, ascending; the last one is `active`.
    segments: Vec<u64>,
    active: File,
    active_len: u64,
    next_offset: u64,
    records_since_snapshot: u64,
    offline: bool,
}

impl MetadataLog {
    /// Opens (creating if needed) the log in `dir`, the `__cluster_metadata` directory
    /// itself. Returns the log and the image rebuilt from snapshot + log.
    pub(crate) fn open(dir: &Path) -> Result<(MetadataLog, MetadataImage), ControllerError> {
        let existed = dir.is_dir();
        fs::create_dir_all(dir).map_err(|e| ControllerError::io(dir, e))?;
        if !existed {
            // The new directory's own entry must be durable before files in it matter.
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
            sync_dir(parent.unwrap_or(Path::new(".")))?;
        }
        remove_temp_files(dir)?;
        let cluster_id = load_or_create_cluster_id(dir)?;
        let mut image = match snapshot::load(dir, &cluster_id)? {
            Some(image) => image,
            None => MetadataImage::new(cluster_id.clone()),
        };
        let snapshot_next = image.last_offset().map_or(0, |s| s + 1);
        let mut segments = list_segments(dir)?;
        let mut next_offset = segments.first().copied().unwrap_or(snapshot_next);
        if next_offset > snapshot_next {
            return Err(ControllerError::corrupt(
                dir,
                format!("log starts at offset {next_offset} but the snapshot ends before {snapshot_next}"),
            ));
        }
        let mut active_len = 0;
        for (i, &base) in segments.iter().enumerate() {
            let path = segment_path(dir, base);
            if base != next_offset {
                return Err(ControllerError::corrupt(
                    &path,
                    format!("segment starts at {base}, expected {next_offset}"),
                ));
            }
            let is_last = i + 1 == segments.len();
            let valid_len = replay_segment(&path, is_last, &mut next_offset, &mut image)?;
            active_len = valid_len;
        }
        if next_offset < snapshot_next {
            // Only reachable if fsynced frames vanished. The snapshot covers every
            // segment, so start over from it rather than leave a gap in the offsets.
            tracing::warn!(dir = %dir.display(), next_offset, snapshot_next, "metadata log ends before its snapshot; continuing from the snapshot");
            for base in segments.drain(..) {
                let path = segment_path(dir, base);
                fs::remove_file(&path).map_err(|e| ControllerError::io(&path, e))?;
            }
            sync_dir(dir)?;
            next_offset = snapshot_next;
        }
        if segments.is_empty() {
            create_segment(dir, next_offset)?;
            segments.push(next_offset);
            active_len = 0;
        }
        let active_base = segments.last().copied().unwrap_or(next_offset);
        let active = open_for_append(&segment_path(dir, active_base))?;
        let log = MetadataLog {
            dir: dir.to_path_buf(),
            cluster_id,
            segments,
            active,
            active_len,
            next_offset,
            records_since_snapshot: next_offset.saturating_sub(snapshot_next),
            offline: false,
        };
        Ok((log, image))
    }

    /// Appends `records` as one atomic batch and fsyncs it before returning. The records
    /// get offsets `next_offset() ..= returned`; returns the offset of the last one.
    #[cfg(test)]
    pub(crate) fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, ControllerError> {
        if self.offline {
            return Err(ControllerError::Offline);
        }
        if records.is_empty() {
            return Err(ControllerError::EmptyBatch);
        }
        let bytes = frame::encode(self.next_offset, records)?;
        let path = self.active_path();
        let written = self
            .active
            .write_all(&bytes)
            .and_then(|()| self.active.sync_data());
        if let Err(e) = written {
            // Leave no partial frame behind: a later good frame after it would be cut
            // as part of a "torn tail" at the next open.
            let rolled_back = self
                .active
                .set_len(self.active_len)
                .and_then(|()| self.active.sync_data());
            if rolled_back.is_err() {
                self.offline = true;
            }
            return Err(ControllerError::io(path, e));
        }
        self.active_len += bytes.len() as u64;
        let count = records.len() as u64;
        self.next_offset += count;
        self.records_since_snapshot += count;
        Ok(self.next_offset - 1)
    }

    /// Writes `image` as the snapshot (atomically), then drops the segments it covers.
    /// `image` must not be ahead of this log. When it covers the whole log, the next
    /// append starts a fresh segment, so the covered prefix can be deleted.
    #[cfg(test)]
    pub(crate) fn snapshot(&mut self, image: &MetadataImage) -> Result<(), ControllerError> {
        if self.offline {
            return Err(ControllerError::Offline);
        }
        let Some(covered) = image.last_offset() else {
            return Ok(()); // an empty image: nothing to snapshot
        };
        if covered >= self.next_offset {
            return Err(ControllerError::SnapshotAhead {
                snapshot: Some(covered),
                last: self.last_offset(),
            });
        }
        snapshot::write(&self.dir, image)?;
        if covered + 1 == self.next_offset {
            self.records_since_snapshot = 0;
            if self.active_len > 0 {
                create_segment(&self.dir, self.next_offset)?;
                self.active = open_for_append(&segment_path(&self.dir, self.next_offset))?;
                self.segments.push(self.next_offset);
                self.active_len = 0;
            }
        }
        // A segment is fully covered when the segment after it starts at or below S + 1.
        let keep_from = self
            .segments
            .windows(2)
            .position(|pair| pair[1] > covered + 1)
            .unwrap_or(self.segments.len() - 1);
        let doomed: Vec<u64> = self.segments.drain(..keep_from).collect();
        for base in &doomed {
            let path = segment_path(&self.dir, *base);
            fs::remove_file(&path).map_err(|e| ControllerError::io(&path, e))?;
        }
        if !doomed.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Offset the next appended record will get.
    #[cfg(test)]
    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Offset of the last record in the log (or in the snapshot), `None` if empty.
    #[cfg(test)]
    pub(crate) fn last_offset(&self) -> Option<u64> {
        self.next_offset.checked_sub(1)
    }

    /// Records appended since the last snapshot that covered the whole log (or since
    /// open, counting only what is in the segments).
    #[cfg(test)]
    pub(crate) fn records_since_snapshot(&self) -> u64 {
        self.records_since_snapshot
    }

    #[cfg(test)]
    pub(crate) fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    #[cfg(test)]
    fn active_path(&self) -> PathBuf {
        let base = self.segments.last().copied().unwrap_or(self.next_offset);
        segment_path(&self.dir, base)
    }
}

/// Replays one segment's frames; returns the length of its valid prefix. Cuts a torn
/// tail of the last segment; fails on anything else that is wrong.
fn replay_segment(
    path: &Path,
    is_last: bool,
    next_offset: &mut u64,
    image: &mut MetadataImage,
) -> Result<u64, ControllerError> {
    let file = File::open(path).map_err(|e| ControllerError::io(path, e))?;
    let mut reader = BufReader::new(file);
    let mut valid_len = 0u64;
    loop {
        let read = frame::read_frame(&mut reader).map_err(|e| match e {
            FrameError::Io(e) => ControllerError::io(path, e),
            FrameError::Undecodable(reason) => ControllerError::corrupt(path, reason),
        })?;
        match read {
            FrameRead::End => return Ok(valid_len),
            FrameRead::Batch {
                base_offset,
                records,
                size,
            } => {
                if base_offset != *next_offset {
                    return Err(ControllerError::corrupt(
                        path,
                        format!("frame at byte {valid_len} has offset {base_offset}, expected {next_offset}"),
                    ));
                }
                for (i, record) in records.iter().enumerate() {
                    image.replay(base_offset + i as u64, record);
                }
                *next_offset += records.len() as u64;
                valid_len += size;
            }
            FrameRead::Torn(reason) => {
                if !is_last {
                    return Err(ControllerError::corrupt(
                        path,
                        format!("damaged frame at byte {valid_len}: {reason}"),
                    ));
                }
                tracing::warn!(path = %path.display(), valid_len, %reason, "cutting torn tail of the metadata log");
                let file = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| ControllerError::io(path, e))?;
                file.set_len(valid_len)
                    .and_then(|()| file.sync_all())
                    .map_err(|e| ControllerError::io(path, e))?;
                return Ok(valid_len);
            }
        }
    }
}

pub(super) fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}{SEGMENT_SUFFIX}"))
}

pub(super) fn list_segments(dir: &Path) -> Result<Vec<u64>, ControllerError> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ControllerError::io(dir, e))? {
        let entry = entry.map_err(|e| ControllerError::io(dir, e))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SEGMENT_SUFFIX)) else {
            continue;
        };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(base) = stem.parse::<u64>() {
                bases.push(base);
            }
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

fn create_segment(dir: &Path, base: u64) -> Result<(), ControllerError> {
    let path = segment_path(dir, base);
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .and_then(|f| f.sync_all())
        .map_err(|e| ControllerError::io(&path, e))?;
    sync_dir(dir)
}

fn open_for_append(path: &Path) -> Result<File, ControllerError> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| ControllerError::io(path, e))
}

fn remove_temp_files(dir: &Path) -> Result<(), ControllerError> {
    for entry in fs::read_dir(dir).map_err(|e| ControllerError::io(dir, e))? {
        let entry = entry.map_err(|e| ControllerError::io(dir, e))?;
        if entry.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| ControllerError::io(&path, e))?;
        }
    }
    Ok(())
}
