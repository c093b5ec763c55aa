//! Recovery of the legacy metadata log, which a migration reads: reopen, torn tails,
//! snapshots.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::MetadataLog;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::record::{ConfigResource, MetadataRecord};

fn topic(n: u128) -> MetadataRecord {
    MetadataRecord::Topic {
        name: format!("t{n}"),
        topic_id: Uuid::from_u128(n + 100),
    }
}

fn config(n: u128, value: Option<&str>) -> MetadataRecord {
    MetadataRecord::Config {
        resource: ConfigResource::Topic(format!("t{n}")),
        name: "retention.ms".into(),
        value: value.map(str::to_owned),
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    out.sort();
    out
}

/// Appends `batches` to a fresh log, replaying into an image as it goes.
fn build(dir: &Path, batches: &[Vec<MetadataRecord>]) -> MetadataImage {
    let (mut log, mut image) = MetadataLog::open(dir).unwrap();
    for batch in batches {
        let first = log.next_offset();
        let last = log.append(batch).unwrap();
        assert_eq!(last, first + batch.len() as u64 - 1);
        for (offset, record) in (first..).zip(batch) {
            image.replay(offset, record);
        }
    }
    image
}

#[test]
fn reopen_replays_to_the_same_image_and_offsets_continue() {
    let dir = tempfile::tempdir().unwrap();
    let batches = vec![
        vec![topic(1), config(1, Some("5"))],
        vec![topic(2)],
        vec![config(1, None)],
    ];
    let incremental = build(dir.path(), &batches);
    assert_eq!(incremental.last_offset(), Some(3));
    assert!(incremental.topic("t1").unwrap().configs.is_empty());

    let (mut log, reopened) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(reopened, incremental);
    assert_eq!(log.next_offset(), 4);
    assert_eq!(log.append(&[topic(3)]).unwrap(), 4);
    assert_eq!(log.cluster_id(), reopened.cluster_id());
    assert_eq!(reopened.cluster_id().len(), 22);
}

#[test]
fn empty_batch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = MetadataLog::open(dir.path()).unwrap();
    assert!(matches!(log.append(&[]), Err(ControllerError::EmptyBatch)));
    assert_eq!(log.last_offset(), None);
}

#[test]
fn every_torn_tail_is_cut_and_the_log_continues() {
    let dir = tempfile::tempdir().unwrap();
    let whole = build(dir.path(), &[vec![topic(1), topic(2)]]);
    let seg = segments(dir.path()).pop().unwrap();
    let good_len = fs::metadata(&seg).unwrap().len();
    let (mut log, _) = MetadataLog::open(dir.path()).unwrap();
    log.append(&[topic(3), config(3, Some("1"))]).unwrap();
    drop(log);
    let full = fs::read(&seg).unwrap();
    assert!(full.len() as u64 > good_len);

    for cut in good_len..full.len() as u64 {
        fs::write(&seg, &full[..cut as usize]).unwrap();
        let (mut log, image) = MetadataLog::open(dir.path()).unwrap();
        assert_eq!(image, whole, "cut at {cut}");
        assert_eq!(
            fs::metadata(&seg).unwrap().len(),
            good_len,
            "tail cut at {cut}"
        );
        assert_eq!(log.append(&[topic(9)]).unwrap(), 2);
    }
}

#[test]
fn a_damaged_last_frame_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let first = build(dir.path(), &[vec![topic(1)]]);
    let (mut log, _) = MetadataLog::open(dir.path()).unwrap();
    log.append(&[topic(2)]).unwrap();
    drop(log);
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0xff;
    fs::write(&seg, &bytes).unwrap();
    let (mut log, image) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(image, first);
    assert_eq!(log.append(&[topic(3)]).unwrap(), 1);
}

#[test]
fn a_snapshot_behind_the_log_keeps_the_segments_it_does_not_cover() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), &[vec![topic(1)], vec![topic(2)]]);
    let (mut log, full) = MetadataLog::open(dir.path()).unwrap();
    let mut behind = MetadataImage::new(log.cluster_id());
    behind.replay(0, &topic(1));
    log.snapshot(&behind).unwrap();
    drop(log);
    assert_eq!(segments(dir.path()).len(), 1, "nothing rolled or deleted");
    let (mut log, image) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(image, full, "snapshot at 0 plus the log's record 1");

    log.snapshot(&image).unwrap();
    assert_eq!(log.append(&[topic(4)]).unwrap(), 2);
    drop(log);
    let segs = segments(dir.path());
    assert_eq!(
        segs.len(),
        1,
        "covered segment deleted after a full snapshot"
    );
    assert!(segs[0].ends_with(format!("{:020}.log", 2)), "{segs:?}");
    let (_, image) = MetadataLog::open(dir.path()).unwrap();
    let names: Vec<&str> = image.topics().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["t1", "t2", "t4"]);
}

#[test]
fn corruption_before_the_last_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), &[vec![topic(1)], vec![topic(2)]]);
    let segs = segments(dir.path());
    assert_eq!(segs.len(), 1);
    // Split into two segments by hand: frame 1 stays, frame 2 moves to a new segment.
    let bytes = fs::read(&segs[0]).unwrap();
    let first_len = 4 + u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    fs::write(&segs[0], &bytes[..first_len]).unwrap();
    fs::write(
        dir.path().join(format!("{:020}.log", 1)),
        &bytes[first_len..],
    )
    .unwrap();
    let (_, image) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(image.topic_count(), 2, "two contiguous segments are fine");

    let mut damaged = bytes[..first_len].to_vec();
    damaged[first_len - 1] ^= 1;
    fs::write(&segs[0], &damaged).unwrap();
    let err = MetadataLog::open(dir.path()).unwrap_err();
    assert!(matches!(err, ControllerError::Corrupt { .. }), "{err}");
}

#[test]
fn snapshot_then_more_records_survives_reopen_and_deletes_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = build(
        dir.path(),
        &[vec![topic(1)], vec![topic(2), config(2, Some("7"))]],
    );
    let (mut log, reopened) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(reopened, image);
    log.snapshot(&image).unwrap();
    let segs = segments(dir.path());
    assert_eq!(segs.len(), 1);
    assert!(segs[0].ends_with(format!("{:020}.log", 3)), "{segs:?}");
    assert_eq!(fs::metadata(&segs[0]).unwrap().len(), 0);
    assert_eq!(log.records_since_snapshot(), 0);

    let last = log
        .append(&[MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(101),
        }])
        .unwrap();
    assert_eq!(last, 3);
    image.replay(
        3,
        &MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(101),
        },
    );
    drop(log);
    let (log, reopened) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(reopened, image);
    assert!(reopened.topic("t1").is_none());
    assert_eq!(
        reopened
            .topic_configs("t2")
            .get("retention.ms")
            .map(String::as_str),
        Some("7")
    );
    assert_eq!(log.next_offset(), 4);
}

#[test]
fn snapshot_ahead_of_the_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, mut image) = MetadataLog::open(dir.path()).unwrap();
    image.replay(5, &topic(1));
    let err = log.snapshot(&image).unwrap_err();
    assert!(
        matches!(err, ControllerError::SnapshotAhead { .. }),
        "{err}"
    );
}

#[test]
fn damaged_snapshot_is_an_error_not_an_empty_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let image = build(dir.path(), &[vec![topic(1)]]);
    let (mut log, _) = MetadataLog::open(dir.path()).unwrap();
    log.snapshot(&image).unwrap();
    drop(log);
    let path = dir.path().join("metadata.snapshot");
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let err = MetadataLog::open(dir.path()).unwrap_err();
    assert!(matches!(err, ControllerError::Corrupt { .. }), "{err}");
}

#[test]
fn leftover_temp_files_are_removed_and_the_cluster_id_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = MetadataLog::open(dir.path()).unwrap();
    let id = log.cluster_id().to_owned();
    drop(log);
    fs::write(dir.path().join("metadata.snapshot.tmp"), b"half").unwrap();
    let (log, _) = MetadataLog::open(dir.path()).unwrap();
    assert_eq!(log.cluster_id(), id);
    assert!(!dir.path().join("metadata.snapshot.tmp").exists());
    // a file that only grows from garbage does not confuse the segment list
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("notes.txt"))
        .unwrap();
    assert!(MetadataLog::open(dir.path()).is_ok());
}
