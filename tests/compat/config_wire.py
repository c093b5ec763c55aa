"""IncrementalAlterConfigs v0 and DescribeConfigs v1 of a BROKER resource, by hand.

librdkafka and kafka-python both refuse a BROKER resource named "" (the cluster-wide
default) on the client side, so the tests set and read it with what Kafka's own
AdminClient sends for `kafka-configs --entity-default`.
"""

import struct

import kafka_wire

API_DESCRIBE_CONFIGS = 32
API_INCREMENTAL_ALTER_CONFIGS = 44
BROKER = 4


class Refused(Exception):
    def __init__(self, code, message):
        super().__init__(f"error {code}: {message}")
        self.code, self.message = code, message


def wire_alter_many(bootstrap, resources, validate_only=False):
    """IncrementalAlterConfigs v0 of BROKER resources [(name, ops)], ops being
    (config, value or None, op); returns [(name, error code, message)] in order."""
    body = struct.pack(">i", len(resources))
    for name, ops in resources:
        configs = b"".join(kafka_wire.kstring(k) + struct.pack(">b", int(getattr(op, "value", op)))
                           + kafka_wire.kstring(v) for k, v, op in ops)
        body += (struct.pack(">b", BROKER) + kafka_wire.kstring(name)
                 + struct.pack(">i", len(ops)) + configs)
    body += struct.pack(">b", 1 if validate_only else 0)
    with kafka_wire.Connection.to(bootstrap) as conn:
        r = kafka_wire.Reader(conn.call(API_INCREMENTAL_ALTER_CONFIGS, 0, body))
    r.i32()  # throttle
    answers = r.array(lambda: (r.i16(), r.string(), r.i8(), r.string()))
    return [(name, code, message) for code, message, _, name in answers]


def wire_alter(bootstrap, name, ops, validate_only=False):
    """IncrementalAlterConfigs v0 of BROKER `name`; raises Refused on an error."""
    ((got, code, message),) = wire_alter_many(bootstrap, [(name, ops)], validate_only)
    assert got == name
    if code:
        raise Refused(code, message)


class Entry:
    def __init__(self, r):
        self.name, self.value = r.string(), r.string()
        self.is_read_only, self.source, self.is_sensitive = r.i8() == 1, r.i8(), r.i8() == 1
        self.synonyms = r.array(lambda: (r.string(), r.string(), r.i8()))

    def __repr__(self):
        return f"{self.name}={self.value} source={self.source} synonyms={self.synonyms}"


def wire_describe(bootstrap, name):
    """DescribeConfigs v1 (with synonyms) of BROKER `name`: {config: Entry}."""
    body = (struct.pack(">i", 1) + struct.pack(">b", BROKER) + kafka_wire.kstring(name)
            + struct.pack(">i", -1) + struct.pack(">b", 1))
    with kafka_wire.Connection.to(bootstrap) as conn:
        r = kafka_wire.Reader(conn.call(API_DESCRIBE_CONFIGS, 1, body))
    r.i32()  # throttle
    (n,) = struct.unpack(">i", r.take(4))
    assert n == 1
    code, message, _, got = r.i16(), r.string(), r.i8(), r.string()
    assert got == name
    if code:
        raise Refused(code, message)
    return {e.name: e for e in r.array(lambda: Entry(r))}
