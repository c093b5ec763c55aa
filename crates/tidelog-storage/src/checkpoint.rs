//! Small checkpoint files, always replaced atomically.
//!
//! Text format, as Kafka operators know it: a version line (`0`), a count line, then one
//! entry per line. A partition's offset checkpoints hold one entry (`<offset>`); its
//! leader-epoch checkpoint holds `<epoch> <start offset>` lines; a log directory's
//! high-watermark file holds `<topic> <partition> <offset>` lines. Writes go to
//! `<name>.tmp`, which is fsynced, renamed over `<name>`, and the directory fsynced, so a
//! reader sees the old or the new file, never a torn one. A file that does not parse is treated as absent
//! (recovery then scans more of the log, which is safe).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

pub(crate) const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
pub(crate) const LOG_START: &str = "log-start-offset-checkpoint";
/// Every partition's high watermark, in the log directory itself (Kafka's file).
pub const HIGH_WATERMARKS_FILE: &str = "replication-offset-checkpoint";
/// The same name in a partition's own directory, where an earlier release kept that
/// partition's high watermark: read at open, removed by the first checkpoint write.
pub(crate) const LEGACY_HIGH_WATERMARK: &str = HIGH_WATERMARKS_FILE;
pub(crate) const LEADER_EPOCH: &str = "leader-epoch-checkpoint";
pub(crate) const CLEAN_SHUTDOWN: &str = "clean-shutdown";

/// Writes `contents` to `dir/name` atomically and durably.
pub(crate) fn write_atomic(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(contents)?;
        crate::fsync::sync_all(&f)?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// fsync of a directory, making renames and unlinks in it durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    crate::fsync::sync_dir(dir)
}

pub(crate) fn encode_lines(lines: &[String]) -> Vec<u8> {
    let mut s = format!("0\n{}\n", lines.len());
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s.into_bytes()
}

/// Entry lines of a checkpoint file, or `None` when missing or malformed.
pub(crate) fn read_lines(dir: &Path, name: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(name)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let entries: Vec<String> = lines.map(str::to_owned).collect();
    (entries.len() == count).then_some(entries)
}

pub(crate) fn write_offset(dir: &Path, name: &str, offset: i64) -> io::Result<()> {
    write_atomic(dir, name, &encode_lines(&[offset.to_string()]))
}

pub(crate) fn read_offset(dir: &Path, name: &str) -> Option<i64> {
    let lines = read_lines(dir, name)?;
    match lines.as_slice() {
        [one] => one.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn write_epochs(dir: &Path, entries: &[(i32, i64)]) -> io::Result<()> {
    let lines: Vec<String> = entries.iter().map(|(e, o)| format!("{e} {o}")).collect();
    write_atomic(dir, LEADER_EPOCH, &encode_lines(&lines))
}

pub(crate) fn read_epochs(dir: &Path) -> Option<Vec<(i32, i64)>> {
    read_lines(dir, LEADER_EPOCH)?
        .iter()
        .map(|l| {
            let mut parts = l.split_whitespace();
            let e = parts.next()?.parse().ok()?;
            let o = parts.next()?.parse().ok()?;
            Some((e, o))
        })
        .collect()
}

/// The high watermarks a log directory's [`HIGH_WATERMARKS_FILE`] holds, by (topic,
/// partition); empty when it is missing or does not parse (the high watermarks then
/// start at each log's start and the replicas move them on).
pub fn read_high_watermarks(log_dir: &Path) -> HashMap<(String, i32), i64> {
    let parse = |line: &String| {
        let mut parts = line.split_whitespace();
        let topic = parts.next()?.to_owned();
        let partition = parts.next()?.parse().ok()?;
        let offset = parts.next()?.parse().ok()?;
        parts
            .next()
            .is_none()
            .then_some(((topic, partition), offset))
    };
    read_lines(log_dir, HIGH_WATERMARKS_FILE)
        .and_then(|lines| lines.iter().map(parse).collect::<Option<HashMap<_, _>>>())
        .unwrap_or_default()
}

/// Replaces a log directory's [`HIGH_WATERMARKS_FILE`] with `entries` (topic,
/// partition, high watermark), atomically and durably: one file and one directory
/// fsync for every partition of the directory.
pub fn write_high_watermarks(log_dir: &Path, entries: &[(String, i32, i64)]) -> io::Result<()> {
    let lines: Vec<String> = entries
        .iter()
        .map(|(topic, partition, offset)| format!("{topic} {partition} {offset}"))
        .collect();
    write_atomic(log_dir, HIGH_WATERMARKS_FILE, &encode_lines(&lines))
}
