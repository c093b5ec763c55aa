//! Metadata records from arbitrary bytes, as a metadata log or snapshot may hold them
//! after corruption: decoding refuses or gives a record that encodes back to itself,
//! and replaying any sequence of decoded records into an image does not panic.

use tidelog_controller::{MetadataImage, MetadataRecord};

/// Records per input (lines of JSON).
const MAX_RECORDS: usize = 256;

pub(super) fn run(data: &[u8]) {
    let mut image = MetadataImage::new("fuzz");
    for (offset, line) in data.split(|b| *b == b'\n').take(MAX_RECORDS).enumerate() {
        let Ok(record) = serde_json::from_slice::<MetadataRecord>(line) else {
            continue;
        };
        let encoded = serde_json::to_vec(&record)
            .unwrap_or_else(|e| panic!("decoded record does not encode: {e}"));
        let again: MetadataRecord = serde_json::from_slice(&encoded)
            .unwrap_or_else(|e| panic!("a record's own encoding does not decode: {e}"));
        assert_eq!(again, record, "record changed through encoding");
        image.replay(offset as u64, &record);
    }
}
