use crate::segment::{IndexParams, Segment};
use crate::{AppendOptions, AppendOrigin, BatchBuilder, Log, LogConfig};

fn append(log: &mut Log, n: usize) {
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 0,
        origin: AppendOrigin::Client,
    };
    for i in 0..n {
        let mut b = BatchBuilder::new()
            .kv(Some(b"k"), Some(&[b'v'; 200]), i as i64)
            .build()
            .unwrap();
        log.append(&mut b, &opts).unwrap();
    }
}

#[test]
fn recovery_restarts_at_the_last_indexed_batch_below_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 500,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    append(&mut log, 40);
    log.flush().unwrap();
    let recovery_point = log.recovery_point();
    append(&mut log, 10);
    let end = log.log_end_offset();
    drop(log);
    let params = IndexParams {
        index_bytes: 10 << 20,
        interval_bytes: 500,
    };
    // Opened trusting its indexes, then recovered from the recovery point: the scan
    // restarts inside the segment instead of giving up on the indexes.
    let (mut seg, _) = Segment::open(dir.path(), 0, params, false, 0, true).unwrap();
    assert_eq!(seg.recover_after(recovery_point).unwrap(), Some(0));
    assert_eq!(seg.next_offset(), end);
    for offset in [0, 17, recovery_point, end - 1] {
        let found = seg.find_batch(offset).unwrap().unwrap();
        assert_eq!(found.header().base_offset(), offset);
    }
    // Nothing below the first index entry: no starting point but the segment start.
    assert_eq!(seg.recover_after(0).unwrap(), None);
}
