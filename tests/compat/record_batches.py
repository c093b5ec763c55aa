"""RecordBatch v2 bytes built by hand, well-formed or deliberately not, and a raw
Produce v8 call to send them, so the tests control every byte the broker sees.

Produce v8 is the last version without tagged fields and the first whose response
names refused records (KIP-467: `record_errors`, `error_message`).
"""

import gzip
import struct

import kafka_wire

API_PRODUCE = 0

ERROR_CORRUPT_MESSAGE = 2
ERROR_MESSAGE_TOO_LARGE = 10
ERROR_INVALID_RECORD = 87


def _crc32c_table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as RecordBatch v2 uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def varint(n):
    """A zig-zag varint."""
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(offset_delta, key, value, key_len=None, header_count=0, pad=b"", overrun=0):
    """One record with its length prefix; the keyword arguments make it lie."""
    body = b"\x00" + varint(0) + varint(offset_delta)
    if key is None:
        body += varint(-1 if key_len is None else key_len)
    else:
        body += varint(len(key) if key_len is None else key_len) + key
    body += varint(len(value)) + value
    body += varint(header_count) + pad
    return varint(len(body) + overrun) + body


def batch(records, count, attributes=0, timestamp=1_700_000_000_000):
    """A batch declaring `count` records around the `records` bytes, CRC over them."""
    after_crc = struct.pack(
        ">hiqqqhii", attributes, count - 1, timestamp, timestamp, -1, -1, -1, count
    ) + records
    crc = crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, then the rest
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + after_crc


def good_batch(values, keys=None):
    """A well-formed uncompressed batch of `values` (keys default to the values)."""
    keys = keys if keys is not None else values
    records = b"".join(record(i, k, v) for i, (k, v) in enumerate(zip(keys, values)))
    return batch(records, len(values))


def gzip_bomb(inflated_bytes):
    """One gzip batch whose records inflate to about `inflated_bytes` of zeros."""
    chunk = 1 << 20
    count = max(1, inflated_bytes // chunk)
    records = b"".join(record(i, b"k", b"\x00" * chunk) for i in range(count))
    return batch(gzip.compress(records, 9), count, attributes=1)


def produce_v8(conn, topic, partition, records, acks=1, timeout_ms=10000):
    """Send one partition's records; returns the partition's answer as a dict."""
    body = (
        kafka_wire.kstring(None)
        + struct.pack(">hi", acks, timeout_ms)
        + struct.pack(">i", 1)
        + kafka_wire.kstring(topic)
        + struct.pack(">i", 1)
        + struct.pack(">ii", partition, len(records))
        + records
    )
    r = kafka_wire.Reader(conn.call(API_PRODUCE, 8, body))
    answers = []

    def read_partition():
        answer = {
            "index": r.i32(),
            "error_code": r.i16(),
            "base_offset": r.i64(),
            "log_append_time_ms": r.i64(),
            "log_start_offset": r.i64(),
            "record_errors": r.array(lambda: (r.i32(), r.string())),
            "error_message": r.string(),
        }
        answers.append(answer)

    def read_topic():
        r.string()
        r.array(read_partition)

    r.array(read_topic)
    r.i32()  # throttle_time_ms
    if len(answers) != 1:
        raise ValueError(f"expected one partition in the produce response, got {len(answers)}")
    return answers[0]
