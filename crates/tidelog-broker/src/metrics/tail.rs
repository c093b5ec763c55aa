//! `/v1/topics/<topic>/partitions/<n>/records`: a bounded look at the records of a
//! partition this node hosts, for the console's live tail. What a consumer could read
//! (up to the high watermark), at most [`MAX_RECORDS`] records from one read of at most
//! [`MAX_READ_BYTES`], each key, value and header value cut to [`MAX_SHOWN_BYTES`].
//! Control batches (transaction markers) are skipped, as a consumer skips them.

use std::os::unix::fs::FileExt;

use serde::Serialize;
use tidelog_records::{check_batch, records_block, BatchHeader, RecordIter};

use super::NodeView;

/// Records answered at most.
pub(crate) const MAX_RECORDS: usize = 100;
/// Bytes of log read for one answer.
const MAX_READ_BYTES: usize = 1 << 20;
/// Decompressed size one batch may have.
const MAX_INFLATE_BYTES: usize = 8 << 20;
/// Bytes of each key, value or header value shown.
const MAX_SHOWN_BYTES: usize = 1024;

/// What the tail asks for: at most `limit` records from `offset`, or else the last
/// `limit` records before `before`, or else the newest `limit` (a page and the pages
/// older and newer than it, see [`page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TailRequest {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) offset: Option<i64>,
    pub(crate) before: Option<i64>,
    pub(crate) limit: usize,
}

/// The offsets a page covers, `[from, until)`, in a log of `[start, hw)`: from
/// `offset` when given, else the `limit` offsets before `before` (the high watermark
/// when not given); both kept within the log.
fn page(start: i64, hw: i64, request: &TailRequest, limit: usize) -> (i64, i64) {
    let until = request.before.map_or(hw, |b| b.clamp(start, hw));
    let back = until.saturating_sub(i64::try_from(limit).unwrap_or(i64::MAX));
    let from = match request.offset {
        Some(offset) => offset.clamp(start, hw),
        None => back.clamp(start, until),
    };
    let until = if request.offset.is_some() { hw } else { until };
    (from, until)
}

#[derive(Debug, Serialize)]
pub(crate) struct Tail {
    topic: String,
    partition: i32,
    log_start_offset: i64,
    high_watermark: i64,
    /// Where the next look starts: after the last record answered.
    next_offset: i64,
    /// The page covered `[from_offset, next_offset)`: the older page is the one
    /// `before` `from_offset` (none when it is the log start).
    from_offset: i64,
    records: Vec<TailRecord>,
}

#[derive(Debug, Serialize)]
struct TailRecord {
    offset: i64,
    timestamp: i64,
    key: Option<Shown>,
    value: Option<Shown>,
    headers: Vec<TailHeader>,
}

#[derive(Debug, Serialize)]
struct TailHeader {
    key: Shown,
    value: Option<Shown>,
}

/// Bytes as text when they are UTF-8, else as hex; cut to [`MAX_SHOWN_BYTES`].
#[derive(Debug, PartialEq, Serialize)]
pub(crate) struct Shown {
    encoding: &'static str,
    data: String,
    /// The whole size; more than shown when cut.
    size: usize,
}

pub(crate) fn shown(bytes: &[u8]) -> Shown {
    let cut = &bytes[..bytes.len().min(MAX_SHOWN_BYTES)];
    // A cut may split a character: text up to the last whole one.
    let text = match std::str::from_utf8(cut) {
        Ok(text) => Some(text),
        Err(e) if e.error_len().is_none() && std::str::from_utf8(bytes).is_ok() => {
            std::str::from_utf8(&cut[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    match text {
        Some(text) => Shown {
            encoding: "utf8",
            data: text.to_string(),
            size: bytes.len(),
        },
        None => Shown {
            encoding: "hex",
            data: cut.iter().map(|b| format!("{b:02x}")).collect(),
            size: bytes.len(),
        },
    }
}

/// The records `request` asks for; None when this node hosts no replica of the
/// partition. Blocking: reads the log file.
pub(crate) fn tail(node: &NodeView, request: &TailRequest) -> Option<Tail> {
    let partition = node.replicas.get(&request.topic, request.partition)?;
    let limit = request.limit.clamp(1, MAX_RECORDS);
    let (start, hw, from, until, slice) = partition
        .with_log(|log| {
            let start = log.log_start_offset();
            let hw = log.high_watermark();
            let (from, until) = page(start, hw, request, limit);
            // Whole batches up to the high watermark (a batch may straddle `until`);
            // `collect` keeps the page's records.
            let slice = if from < until {
                log.read(from, MAX_READ_BYTES, hw)
                    .ok()
                    .and_then(|r| r.slice)
            } else {
                None
            };
            Ok((start, hw, from, until, slice))
        })
        .ok()?;
    let mut records = Vec::new();
    if let Some(slice) = slice {
        let len = usize::try_from(slice.len).unwrap_or(0).min(MAX_READ_BYTES);
        let mut buf = vec![0u8; len];
        if slice.file.read_exact_at(&mut buf, slice.position).is_ok() {
            collect(&buf, from, until, limit, &mut records);
        }
    }
    let next_offset = records.last().map_or(from, |r| r.offset + 1);
    Some(Tail {
        topic: request.topic.clone(),
        partition: request.partition,
        log_start_offset: start,
        high_watermark: hw,
        next_offset,
        from_offset: from,
        records,
    })
}

/// The data records of the whole batches in `buf` from `from` up to `hw`.
fn collect(buf: &[u8], from: i64, hw: i64, limit: usize, out: &mut Vec<TailRecord>) {
    let mut pos = 0;
    while pos < buf.len() && out.len() < limit {
        let Ok(size) = check_batch(&buf[pos..]) else {
            return;
        };
        let batch = &buf[pos..pos + size];
        pos += size;
        let Ok(header) = BatchHeader::new(batch) else {
            return;
        };
        if header.is_control() {
            continue;
        }
        let Ok(block) = records_block(batch, MAX_INFLATE_BYTES) else {
            continue;
        };
        for record in RecordIter::new(&block, header.record_count()) {
            let Ok(record) = record else { break };
            let offset = header.base_offset() + i64::from(record.offset_delta);
            if offset < from {
                continue;
            }
            if offset >= hw || out.len() >= limit {
                return;
            }
            let timestamp = if header.is_log_append_time() {
                header.max_timestamp()
            } else {
                header.record_timestamp(record.timestamp_delta)
            };
            out.push(TailRecord {
                offset,
                timestamp,
                key: record.key.map(shown),
                value: record.value.map(shown),
                headers: record
                    .headers()
                    .map(|h| TailHeader {
                        key: shown(h.key),
                        value: h.value.map(shown),
                    })
                    .collect(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_records::BatchBuilder;

    #[test]
    fn shown_bytes_are_text_when_utf8_else_hex_and_cut() {
        assert_eq!(
            shown(b"hello"),
            Shown {
                encoding: "utf8",
                data: "hello".into(),
                size: 5
            }
        );
        assert_eq!(
            shown(&[0xff, 0x00]),
            Shown {
                encoding: "hex",
                data: "ff00".into(),
                size: 2
            }
        );
        let long = "é".repeat(MAX_SHOWN_BYTES);
        let cut = shown(long.as_bytes());
        assert_eq!(cut.encoding, "utf8");
        assert_eq!(cut.size, long.len());
        assert_eq!(cut.data.len(), MAX_SHOWN_BYTES);
    }

    #[test]
    fn pages_go_forward_from_an_offset_or_back_from_one_within_the_log() {
        let ask = |offset, before| TailRequest {
            topic: "t".into(),
            partition: 0,
            offset,
            before,
            limit: 10,
        };
        // The newest page; then the one before it, and the first one.
        assert_eq!(page(100, 200, &ask(None, None), 10), (190, 200));
        assert_eq!(page(100, 200, &ask(None, Some(190)), 10), (180, 190));
        assert_eq!(page(100, 200, &ask(None, Some(105)), 10), (100, 105));
        assert_eq!(page(100, 200, &ask(None, Some(50)), 10), (100, 100));
        // Forward from an offset, up to the high watermark (the limit cuts it).
        assert_eq!(page(100, 200, &ask(Some(150), None), 10), (150, 200));
        assert_eq!(page(100, 200, &ask(Some(10), None), 10), (100, 200));
        assert_eq!(page(100, 200, &ask(Some(500), None), 10), (200, 200));
        // A log shorter than a page.
        assert_eq!(page(0, 3, &ask(None, None), 10), (0, 3));
    }

    #[test]
    fn collect_reads_records_from_an_offset_up_to_the_high_watermark_and_limit() {
        let mut buf = Vec::new();
        for base in [0i64, 3] {
            let mut batch = BatchBuilder::new();
            for i in 0..3 {
                let value = format!("v{}", base + i);
                batch = batch.kv(Some(b"k"), Some(value.as_bytes()), 1000 + base + i);
            }
            let mut bytes = batch.build().unwrap();
            tidelog_records::BatchHeaderMut::new(&mut bytes)
                .unwrap()
                .set_base_offset(base);
            buf.extend_from_slice(&bytes);
        }
        let mut out = Vec::new();
        collect(&buf, 1, 5, 10, &mut out);
        let offsets: Vec<i64> = out.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [1, 2, 3, 4]);
        assert_eq!(out[0].value.as_ref().unwrap().data, "v1");
        assert_eq!(out[0].timestamp, 1001);
        let mut limited = Vec::new();
        collect(&buf, 0, 6, 2, &mut limited);
        assert_eq!(limited.len(), 2);
    }
}
