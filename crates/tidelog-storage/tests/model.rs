//! Property test: random operation sequences against an in-memory model of the log.
//!
//! The model is the list of batches (as stored, with assigned offsets), the log start
//! offset, and the durable offset. Crashes drop the `Log` without closing it and then
//! damage only what was never fsynced, in the segment holding the durable offset: a cut
//! at a random byte and optionally one flipped byte inside a batch's length/CRC-covered
//! bytes.
//!
//! It runs twice: with the roll's fsyncs on the appending thread (every closed segment
//! is durable), and with a manual background flusher whose passes are operations of
//! their own, so a crash can hit rolled segments that were never synced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use proptest::prelude::*;
use tidelog_storage::{BackgroundFlusher, BatchBuilder, BatchHeader, Log, LogConfig};

use common::{files_with_ext, opts};

#[derive(Debug, Clone)]
enum Op {
    Append {
        batches: Vec<(u8, u16)>,
        ts: i64,
    },
    Read {
        at: u16,
        max_bytes: u16,
        upper_slack: u8,
    },
    Roll,
    Retention {
        keep_bytes: u16,
    },
    Truncate {
        at: u16,
    },
    Flush,
    /// The background flusher's queued passes run (a no-op without one).
    BackgroundPass,
    Reopen,
    Crash {
        cut: u32,
        flip: Option<u32>,
    },
    Timestamp {
        ts: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop::collection::vec((1u8..5, 0u16..300), 1..3), 0i64..1000)
            .prop_map(|(batches, ts)| Op::Append { batches, ts }),
        4 => (any::<u16>(), 1u16..3000, any::<u8>())
            .prop_map(|(at, max_bytes, upper_slack)| Op::Read { at, max_bytes, upper_slack }),
        1 => Just(Op::Roll),
        1 => (0u16..6000).prop_map(|keep_bytes| Op::Retention { keep_bytes }),
        1 => any::<u16>().prop_map(|at| Op::Truncate { at }),
        2 => Just(Op::Flush),
        2 => Just(Op::BackgroundPass),
        1 => Just(Op::Reopen),
        2 => (any::<u32>(), prop::option::of(any::<u32>())).prop_map(|(cut, flip)| Op::Crash { cut, flip }),
        1 => (0i64..1100).prop_map(|ts| Op::Timestamp { ts }),
    ]
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2500,
        segment_ms: 1000,
        segment_index_bytes: 160,
        index_interval_bytes: 150,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

#[derive(Default)]
struct Model {
    /// (base offset, stored bytes, per-record timestamps)
    batches: Vec<(i64, Vec<u8>, Vec<i64>)>,
    start: i64,
    end: i64,
    durable: i64,
}

impl Model {
    fn from(&self, offset: i64) -> impl Iterator<Item = &(i64, Vec<u8>, Vec<i64>)> {
        self.batches
            .iter()
            .filter(move |(b, bytes, _)| last_offset(bytes) >= offset && *b <= last_offset(bytes))
    }
    fn truncate(&mut self, offset: i64) {
        self.batches
            .retain(|(_, bytes, _)| last_offset(bytes) < offset);
        self.end = self
            .batches
            .last()
            .map_or(self.start.max(0), |(_, b, _)| last_offset(b) + 1);
        self.end = self.end.max(self.start);
        self.durable = self.durable.min(self.end);
    }
}

fn last_offset(bytes: &[u8]) -> i64 {
    BatchHeader::new(bytes).unwrap().last_offset()
}

/// Checks a whole read-back of the log against the model.
fn check_everything(log: &Log, model: &Model) {
    assert_eq!(log.log_start_offset(), model.start);
    assert_eq!(log.log_end_offset(), model.end);
    let mut next = model.start;
    let mut got = Vec::new();
    while let Some(slice) = log.read(next, 1 << 16, i64::MAX).unwrap().slice {
        let bytes = slice.read_to_vec().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::new(&bytes[pos..]).unwrap();
            let size = h.total_size().unwrap();
            got.push(bytes[pos..pos + size].to_vec());
            next = h.last_offset() + 1;
            pos += size;
        }
    }
    let want: Vec<Vec<u8>> = model.from(model.start).map(|(_, b, _)| b.clone()).collect();
    assert_eq!(got.len(), want.len(), "batch count");
    assert!(got == want, "log content differs from the model");
}

/// Byte position in `file` of the first batch whose base offset is `>= offset`.
fn position_of(file: &Path, offset: i64) -> (u64, Vec<(u64, u64)>) {
    let bytes = std::fs::read(file).unwrap();
    let mut pos = 0usize;
    let mut durable_pos = None;
    let mut batches = Vec::new();
    while pos + 61 <= bytes.len() {
        let h = BatchHeader::new(&bytes[pos..]).unwrap();
        let size = h.total_size().unwrap();
        if h.base_offset() >= offset && durable_pos.is_none() {
            durable_pos = Some(pos as u64);
        }
        batches.push((pos as u64, size as u64));
        pos += size;
    }
    (durable_pos.unwrap_or(bytes.len() as u64), batches)
}

fn crash(dir: &Path, model: &Model, cut: u32, flip: Option<u32>) {
    // The segment holding the first byte that may not be on disk.
    let from = model.durable.max(model.start);
    let active = files_with_ext(dir, "log")
        .into_iter()
        .rev()
        .find(|f| segment_base(f) <= from)
        .unwrap();
    let len = std::fs::metadata(&active).unwrap().len();
    let (durable_pos, batches) = position_of(&active, model.durable);
    let room = len - durable_pos;
    let cut_at = durable_pos + u64::from(cut) % (room + 1);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&active)
        .unwrap();
    f.set_len(cut_at).unwrap();
    if let Some(seed) = flip {
        let candidates: Vec<_> = batches
            .iter()
            .filter(|(p, s)| *p >= durable_pos && p + s <= cut_at)
            .collect();
        if !candidates.is_empty() {
            let (p, s) = candidates[seed as usize % candidates.len()];
            // Length, magic, CRC and everything it covers; not baseOffset/leaderEpoch.
            let covered: Vec<u64> = (8..12).chain(16..*s).collect();
            let at = p + covered[(seed as usize / 7) % covered.len()];
            let mut b = [0u8];
            f.read_exact_at(&mut b, at).unwrap();
            f.write_all_at(&[b[0] ^ (1 << (seed % 8))], at).unwrap();
        }
    }
}

fn segment_base(file: &Path) -> i64 {
    file.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

/// The model test fsyncs a lot (every roll, flush, reopen and recovery); on tmpfs those
/// cost nothing, which keeps 64 cases within seconds. Crashes are simulated by damaging
/// files, so the file system does not matter to what is checked.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Opens the log, handing its fsyncs to `flusher` if there is one.
fn open(dir: &Path, flusher: Option<&BackgroundFlusher>) -> Log {
    let mut log = Log::open(dir, config()).unwrap();
    log.set_background_flusher(flusher.cloned());
    log
}

/// The first offset of the active segment: everything before it is in rolled segments.
fn active_base(log: &Log) -> i64 {
    *log.segment_base_offsets().last().unwrap()
}

fn run(ops: Vec<Op>, flusher: Option<BackgroundFlusher>) {
    let dir = scratch_dir();
    let mut log = open(dir.path(), flusher.as_ref());
    let mut model = Model::default();
    let mut clock = 0i64;
    for op in ops {
        clock += 1;
        match op {
            Op::Append { batches, ts } => {
                let mut buf = Vec::new();
                let mut stamps = Vec::new();
                for (n, pad) in &batches {
                    let mut b = BatchBuilder::new();
                    let mut t = Vec::new();
                    for i in 0..*n {
                        let record_ts = ts + i64::from(i) * 3;
                        b = b.kv(Some(&[i]), Some(&vec![i; usize::from(*pad)]), record_ts);
                        t.push(record_ts);
                    }
                    buf.extend_from_slice(&b.build().unwrap());
                    stamps.push(t);
                }
                let info = log.append(&mut buf, &opts(clock)).unwrap();
                assert_eq!(info.first_offset, model.end, "offsets are dense");
                let mut pos = 0;
                for t in stamps {
                    let h = BatchHeader::new(&buf[pos..]).unwrap();
                    let size = h.total_size().unwrap();
                    model
                        .batches
                        .push((h.base_offset(), buf[pos..pos + size].to_vec(), t));
                    pos += size;
                }
                model.end = info.last_offset + 1;
            }
            Op::Read {
                at,
                max_bytes,
                upper_slack,
            } => {
                let span = model.end - model.start + 2;
                let offset = model.start - 1 + i64::from(at) % span;
                let upper = offset + i64::from(upper_slack % 8);
                let result = log.read(offset, usize::from(max_bytes), upper);
                if offset < model.start {
                    assert!(result.unwrap_err().is_below_start());
                    continue;
                }
                if offset > model.end {
                    assert!(result.unwrap_err().is_above_end());
                    continue;
                }
                let result = result.unwrap();
                let eligible: Vec<&Vec<u8>> = model
                    .from(offset)
                    .map(|(_, b, _)| b)
                    .take_while(|b| last_offset(b) < upper)
                    .collect();
                match result.slice {
                    None => assert!(eligible.is_empty() || offset == model.end),
                    Some(slice) => {
                        let bytes = slice.read_to_vec().unwrap();
                        let mut expected = Vec::new();
                        let mut k = 0;
                        while expected.len() < bytes.len() && k < eligible.len() {
                            expected.extend_from_slice(eligible[k]);
                            k += 1;
                        }
                        assert!(k >= 1 && bytes == expected, "read is not a model prefix");
                        assert!(k == 1 || bytes.len() <= usize::from(max_bytes));
                        assert_eq!(
                            result.first_batch_offset,
                            model.from(offset).next().unwrap().0
                        );
                    }
                }
            }
            Op::Roll => {
                clock += 1000;
                log.roll_if_due(clock).unwrap();
            }
            Op::Retention { keep_bytes } => {
                let mut c = config();
                c.retention_bytes = i64::from(keep_bytes);
                log.set_config(c);
                log.apply_retention(clock).unwrap();
                let start = log.log_start_offset();
                assert!(start >= model.start && start <= model.end);
                model.start = start;
                model.batches.retain(|(b, _, _)| *b >= start);
                log.set_config(config());
            }
            Op::Truncate { at } => {
                let target = model.start + i64::from(at) % (model.end - model.start + 1);
                log.truncate_to(target).unwrap();
                model.truncate(target);
            }
            Op::Flush => {
                log.flush().unwrap();
                model.durable = model.end;
            }
            Op::BackgroundPass => {
                if let Some(flusher) = &flusher {
                    flusher.run_pending();
                    model.durable = model.durable.max(active_base(&log));
                }
            }
            Op::Reopen => {
                log.close().unwrap();
                log = open(dir.path(), flusher.as_ref());
                model.durable = model.end;
            }
            Op::Crash { cut, flip } => {
                drop(log);
                crash(dir.path(), &model, cut, flip);
                log = open(dir.path(), flusher.as_ref());
                let end = log.log_end_offset();
                assert!(
                    end >= model.durable,
                    "fsynced data lost: {end} < {}",
                    model.durable
                );
                assert!(end <= model.end);
                model.truncate(end);
                model.end = end;
                model.durable = end;
            }
            Op::Timestamp { ts } => {
                let expected = model
                    .from(model.start)
                    .flat_map(|(b, _, t)| {
                        t.iter().enumerate().map(move |(i, ts)| (b + i as i64, *ts))
                    })
                    .find(|&(o, t)| o >= model.start && t >= ts);
                assert_eq!(log.offset_for_timestamp(ts).unwrap(), expected, "ts {ts}");
            }
        }
        if flusher.is_none() {
            // Rolls fsync the closed segment on the appending thread.
            model.durable = model.durable.max(active_base(&log));
        }
        assert!(
            log.recovery_point() <= model.durable.max(model.start) || flusher.is_none(),
            "the recovery point {} passed unsynced data at {}",
            log.recovery_point(),
            model.durable
        );
        check_everything(&log, &model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops, None);
    }

    #[test]
    fn log_with_a_background_flusher_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops, Some(BackgroundFlusher::manual()));
    }
}
