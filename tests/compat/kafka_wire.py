"""Just enough of the Kafka wire protocol, by hand, to send exact bytes.

The client libraries hide what goes over the socket; the bad-input, long-poll and
out-of-range tests need to control it. Only non-flexible request versions are used
(request header v1, response header v0), so no tagged fields are involved.
"""

import socket
import struct
import time

API_FETCH = 1
API_METADATA = 3
API_API_VERSIONS = 18

ERROR_NONE = 0
ERROR_OFFSET_OUT_OF_RANGE = 1
ERROR_UNSUPPORTED_VERSION = 35


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset)."""


def kstring(value):
    """A Kafka STRING / NULLABLE_STRING: i16 length, then UTF-8 bytes (-1 = null)."""
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def frame(payload):
    """Prefix a request with its i32 size."""
    return struct.pack(">i", len(payload)) + payload


def request(api_key, api_version, correlation_id, body=b"", client_id="tidelog-compat"):
    """A framed request with header v1 (api key, version, correlation id, client id)."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + kstring(client_id)
    return frame(header + body)


def uvarint(n):
    """An unsigned varint (flexible versions' lengths and tag counts)."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def compact_string(value):
    """A flexible-version (compact) string: length + 1 as a uvarint, then the bytes."""
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def compact_array(items):
    """A flexible-version (compact) array of already encoded items."""
    return uvarint(len(items) + 1) + b"".join(items)


class Reader:
    """Sequential big-endian decoding of a response body."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"response truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def i8(self):
        return self.unpack(">b")

    def i16(self):
        return self.unpack(">h")

    def i32(self):
        return self.unpack(">i")

    def i64(self):
        return self.unpack(">q")

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def nullable_bytes(self):
        n = self.i32()
        return None if n < 0 else self.take(n)

    def array(self, read_item):
        n = self.i32()
        if n < 0:
            return None
        return [read_item() for _ in range(n)]

    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.i8() & 0xFF
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_array(self, read_item):
        n = self.uvarint()
        return None if n == 0 else [read_item() for _ in range(n - 1)]

    def skip_tags(self):
        """Skips a tagged-field section (flexible versions)."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


class Connection:
    """One TCP connection to a broker; every read has a deadline."""

    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_correlation_id = 1

    @classmethod
    def to(cls, bootstrap, timeout=10.0):
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n, deadline):
        chunks = []
        while n > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no complete response before the deadline")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(min(n, 1 << 20))
            except (ConnectionResetError, BrokenPipeError) as err:
                raise ConnectionClosed(str(err)) from err
            if not chunk:
                raise ConnectionClosed("EOF")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_response(self, timeout=10.0):
        """Read one response; returns (correlation_id, body)."""
        deadline = time.monotonic() + timeout
        (size,) = struct.unpack(">i", self._recv_exact(4, deadline))
        if size < 4 or size > 64 << 20:
            raise ValueError(f"implausible response size {size}")
        payload = self._recv_exact(size, deadline)
        (correlation_id,) = struct.unpack(">i", payload[:4])
        return correlation_id, payload[4:]

    def call(self, api_key, api_version, body=b"", timeout=10.0):
        """Send one request and return the body of its response."""
        correlation_id = self.next_correlation_id
        self.next_correlation_id += 1
        self.send(request(api_key, api_version, correlation_id, body))
        got, response = self.recv_response(timeout)
        if got != correlation_id:
            raise ValueError(f"correlation id {got}, expected {correlation_id}")
        return response

    def flexible_call(self, api_key, api_version, body=b"", timeout=10.0):
        """A call at a flexible version: request header v2 (an empty tagged-field section
        after the client id), `body` ending with the body's own; returns a Reader past
        the response header's tagged fields."""
        r = Reader(self.call(api_key, api_version, b"\x00" + body + b"\x00", timeout))
        r.skip_tags()
        return r

    def wait_closed(self, timeout=5.0):
        """Read and discard until EOF. Returns the number of bytes received before it.

        Raises TimeoutError if the broker keeps the connection open past the timeout.
        """
        deadline = time.monotonic() + timeout
        received = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"connection still open after {timeout} s ({received} bytes received)")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return received
            except socket.timeout as err:
                raise TimeoutError(f"connection still open after {timeout} s ({received} bytes received)") from err
            if not chunk:
                return received
            received += len(chunk)


def api_versions(conn, version=0):
    """ApiVersions v0: returns (error_code, {api_key: (min_version, max_version)})."""
    reader = Reader(conn.call(API_API_VERSIONS, version))
    error_code = reader.i16()
    ranges = {}
    for api_key, lo, hi in reader.array(lambda: (reader.i16(), reader.i16(), reader.i16())):
        ranges[api_key] = (lo, hi)
    return error_code, ranges


def fetch_v5_body(topic, partition, offset, max_wait_ms, min_bytes=1, max_bytes=1 << 20):
    """Fetch v5 request body for one partition (read_uncommitted)."""
    return (
        struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
        + struct.pack(">i", 1)
        + kstring(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iqqi", partition, offset, -1, max_bytes)
    )


def parse_fetch_v5(body):
    """Fetch v5 response for one partition: dict with error_code, watermarks, records."""
    reader = Reader(body)
    reader.i32()  # throttle_time_ms
    partitions = []

    def read_partition():
        part = {
            "partition": reader.i32(),
            "error_code": reader.i16(),
            "high_watermark": reader.i64(),
            "last_stable_offset": reader.i64(),
            "log_start_offset": reader.i64(),
        }
        reader.array(lambda: (reader.i64(), reader.i64()))  # aborted transactions
        part["records"] = reader.nullable_bytes() or b""
        partitions.append(part)

    def read_topic():
        reader.string()
        reader.array(read_partition)

    reader.array(read_topic)
    if len(partitions) != 1:
        raise ValueError(f"expected one partition in the fetch response, got {len(partitions)}")
    return partitions[0]


def fetch_v5(conn, topic, partition, offset, max_wait_ms, timeout=None):
    """Send a Fetch v5 for one partition and decode the answer."""
    body = fetch_v5_body(topic, partition, offset, max_wait_ms)
    wait = timeout if timeout is not None else max_wait_ms / 1000 + 10
    return parse_fetch_v5(conn.call(API_FETCH, 5, body, timeout=wait))


def batch_base_offsets(records):
    """Base offsets of the complete RecordBatches in a fetch's records bytes."""
    offsets = []
    pos = 0
    while pos + 12 <= len(records):
        base_offset, batch_length = struct.unpack(">qi", records[pos : pos + 12])
        if pos + 12 + batch_length > len(records):
            break  # a partial trailing batch is allowed in fetch responses
        offsets.append(base_offset)
        pos += 12 + batch_length
    return offsets
