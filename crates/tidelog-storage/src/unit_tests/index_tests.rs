use crate::index::{OffsetIndex, TimeIndex};

#[test]
fn offset_index_floor_lookup_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::create(&path, 80).unwrap();
    assert_eq!(idx.floor_position(5), 0);
    assert!(idx.append(10, 4100));
    assert!(idx.append(20, 8300));
    assert!(!idx.append(20, 9000), "non-increasing offset accepted");
    assert!(!idx.append(25, 8000), "non-increasing position accepted");
    assert!(idx.append(30, 12_500));
    assert_eq!(idx.floor_position(9), 0);
    assert_eq!(idx.floor_position(10), 4100);
    assert_eq!(idx.floor_position(29), 8300);
    assert_eq!(idx.floor_position(u32::MAX), 12_500);
    // Preallocated to 10 entries, 3 used; the zero tail is accepted on load.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);
    drop(idx);
    let idx = OffsetIndex::load(&path, 20_000).unwrap().unwrap();
    assert_eq!(idx.len(), 3);
    assert_eq!(idx.entry(2), (30, 12_500));
    // Positions beyond the log make the index untrustworthy.
    drop(idx);
    assert!(OffsetIndex::load(&path, 10_000).unwrap().is_none());
}

#[test]
fn garbage_index_is_rejected_and_full_index_refuses_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::create(&path, 16).unwrap();
    assert!(idx.append(1, 10) && idx.append(2, 20));
    assert!(idx.is_full());
    assert!(!idx.append(3, 30));
    idx.trim().unwrap();
    drop(idx);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&0u32.to_be_bytes()); // second entry goes backwards
    std::fs::write(&path, &bytes).unwrap();
    assert!(OffsetIndex::load(&path, 1000).unwrap().is_none());
    assert!(OffsetIndex::load(&dir.path().join("missing.index"), 1000)
        .unwrap()
        .is_none());
}

#[test]
fn time_index_finds_the_last_entry_strictly_older() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.timeindex");
    let mut t = TimeIndex::create(&path, 120).unwrap();
    assert!(t.maybe_append(100, 4));
    assert!(
        !t.maybe_append(100, 9),
        "equal timestamp must not add an entry"
    );
    assert!(t.maybe_append(200, 9));
    assert!(t.maybe_append(300, 15));
    assert_eq!(t.last_offset_older_than(100), None);
    assert_eq!(t.last_offset_older_than(101), Some(4));
    assert_eq!(t.last_offset_older_than(300), Some(9));
    assert_eq!(t.last_offset_older_than(i64::MAX), Some(15));
    t.trim().unwrap();
    drop(t);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 36);
    let t = TimeIndex::load(&path).unwrap().unwrap();
    assert_eq!(t.last(), Some((300, 15)));
}

#[test]
fn loading_a_sparse_preallocated_index_reads_only_its_written_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::create(&path, 10 << 20).unwrap();
    for i in 1..=100u32 {
        assert!(idx.append(i * 10, i * 4096));
    }
    drop(idx);
    let file = crate::index_file::IndexFile::open(&path, 8).unwrap();
    // On a filesystem with SEEK_DATA only the written page(s) count; without it, all.
    assert!(
        file.slots() == 1_310_720 || file.slots() <= 4096 / 8 * 4,
        "{}",
        file.slots()
    );
    let idx = OffsetIndex::load(&path, 1 << 30).unwrap().unwrap();
    assert_eq!(idx.len(), 100);
    assert_eq!(idx.entry(99), (1000, 409_600));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 << 20);
}
