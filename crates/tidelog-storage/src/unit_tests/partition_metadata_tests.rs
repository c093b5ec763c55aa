use uuid::Uuid;

use crate::partition_metadata::{decode, encode};
use crate::{
    claim_partition_dir, is_delete_dir_name, read_topic_id, AppendOptions, AppendOrigin,
    BatchBuilder, DirClaim, Log, LogConfig, StorageError, PARTITION_METADATA,
};

fn append(log: &mut Log, n: usize) {
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 0,
        origin: AppendOrigin::Client,
    };
    for i in 0..n {
        let mut b = BatchBuilder::new()
            .kv(Some(b"k"), Some(b"v"), i as i64)
            .build()
            .unwrap();
        log.append(&mut b, &opts).unwrap();
    }
}

/// A log of `records` records in `dir` as an earlier release left it: no
/// `partition.metadata`.
fn legacy_log(dir: &std::path::Path, records: usize) {
    let mut log = Log::open(dir, LogConfig::default()).unwrap();
    append(&mut log, records);
    log.close().unwrap();
    assert!(!dir.join(PARTITION_METADATA).exists());
}

#[test]
fn the_file_is_kafkas_two_lines_with_a_base64url_topic_id() {
    // Kafka prints Uuid(0, 1) as AAAAAAAAAAAAAAAAAAAAAQ.
    let id = Uuid::from_u128(1);
    assert_eq!(encode(id), "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ");
    assert_eq!(
        decode("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"),
        Ok(id)
    );
    // A trailing newline and extra spaces after the colon are read as Kafka reads them.
    assert_eq!(
        decode("version: 0\ntopic_id:   AAAAAAAAAAAAAAAAAAAAAQ\n"),
        Ok(id)
    );
    let random = Uuid::new_v4();
    assert_eq!(decode(&encode(random)), Ok(random));
    for bad in [
        "",
        "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
        "version: 0",
        "version: 0\ntopic: AAAAAAAAAAAAAAAAAAAAAQ",
        "version: 0\ntopic_id: AAAA",
        "version: 0\ntopic_id: !!!!!!!!!!!!!!!!!!!!!!",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nmore",
    ] {
        assert!(decode(bad).is_err(), "{bad:?} must not parse");
    }
}

#[test]
fn a_new_partition_directory_is_created_holding_its_topic_id() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("orders-0");
    let id = Uuid::new_v4();
    let (log, claim) = Log::open_partition(&dir, id, LogConfig::default()).unwrap();
    assert_eq!(claim, DirClaim::Created);
    assert_eq!(read_topic_id(&dir).unwrap(), Some(id));
    assert_eq!(
        std::fs::read_to_string(dir.join(PARTITION_METADATA)).unwrap(),
        encode(id)
    );
    assert!(!dir.join("partition.metadata.tmp").exists());
    log.close().unwrap();
    let (log, claim) = Log::open_partition(&dir, id, LogConfig::default()).unwrap();
    assert_eq!(claim, DirClaim::Owned);
    log.close().unwrap();
}

#[test]
fn a_directory_of_another_topic_is_renamed_aside_and_never_served() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("orders-0");
    let old = Uuid::new_v4();
    let (mut log, _) = Log::open_partition(&dir, old, LogConfig::default()).unwrap();
    append(&mut log, 5);
    log.close().unwrap();

    let new = Uuid::new_v4();
    let (log, claim) = Log::open_partition(&dir, new, LogConfig::default()).unwrap();
    let DirClaim::Replaced { found, moved_to } = claim else {
        panic!("expected the old directory to be replaced, got {claim:?}");
    };
    assert_eq!(found, old);
    assert_eq!(log.log_end_offset(), 0, "the new topic starts empty");
    assert_eq!(read_topic_id(&dir).unwrap(), Some(new));
    let name = moved_to.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("orders-0.") && name.ends_with("-delete"),
        "{name}"
    );
    assert!(is_delete_dir_name(name));
    assert_eq!(moved_to.parent(), dir.parent());
    // The old records are all still there, under the old id, until someone deletes them.
    assert_eq!(read_topic_id(&moved_to).unwrap(), Some(old));
    let old_log = Log::open(&moved_to, LogConfig::default()).unwrap();
    assert_eq!(old_log.log_end_offset(), 5);
}

#[test]
fn a_directory_without_the_file_is_adopted_with_its_records() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("orders-0");
    legacy_log(&dir, 7);
    let id = Uuid::new_v4();
    let (log, claim) = Log::open_partition(&dir, id, LogConfig::default()).unwrap();
    assert_eq!(claim, DirClaim::Adopted);
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(read_topic_id(&dir).unwrap(), Some(id));
    log.close().unwrap();
    // Adopted once: from now on it belongs to that topic alone.
    let other = Uuid::new_v4();
    let claim = claim_partition_dir(&dir, other).unwrap();
    assert!(matches!(claim, DirClaim::Replaced { found, .. } if found == id));
}

#[test]
fn an_unreadable_file_is_an_error_and_the_directory_is_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("orders-0");
    legacy_log(&dir, 3);
    std::fs::write(dir.join(PARTITION_METADATA), "version: 7\ntopic_id: x").unwrap();
    let Err(err) = Log::open_partition(&dir, Uuid::new_v4(), LogConfig::default()) else {
        panic!("a partition.metadata that does not parse must not open");
    };
    assert!(
        matches!(err, StorageError::PartitionMetadata { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("partition.metadata"), "{err}");
    assert!(dir.join("00000000000000000000.log").exists());
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
}

#[test]
fn renamed_directory_names_stay_legal_and_recognisable() {
    let root = tempfile::tempdir().unwrap();
    let long = format!("{}-12", "t".repeat(249));
    let dir = root.path().join(&long);
    std::fs::create_dir(&dir).unwrap();
    let moved = crate::rename_for_deletion(&dir).unwrap();
    let name = moved.file_name().unwrap().to_str().unwrap();
    assert!(name.len() <= 255, "{}", name.len());
    assert!(is_delete_dir_name(name), "{name}");
    assert!(!dir.exists() && moved.is_dir());
    for not_deleted in [
        "orders-0",
        "orders-0-delete",
        "orders-0.abc-delete",
        "__cluster_metadata",
    ] {
        assert!(!is_delete_dir_name(not_deleted), "{not_deleted}");
    }
}
