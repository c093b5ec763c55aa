"""Kafka's BROKER_LOGGER configs (`kafka-configs --entity-type broker-loggers`): a
node's log levels described and changed while it runs, with kafka-python's admin client
and, where that client checks first, by hand on the wire."""

import re
import struct
import time

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

import kafka_wire
from compat_helpers import wait_until

INVALID_REQUEST = 42
INVALID_CONFIG = 40
API_ALTER_CONFIGS = 33
API_DESCRIBE_CONFIGS = 32


def admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)


def levels(client, broker_id="1"):
    described = client.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, broker_id)],
                                        config_filter="all")
    (by_name,) = described["broker_logger"].values()
    return {name: entry["value"] for name, entry in by_name.items()}


def alter(client, configs, broker_id="1"):
    """IncrementalAlterConfigs of this broker's loggers -> (error code, message)."""
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, broker_id, configs=configs)
    (result,) = client.alter_configs([resource], raise_on_unknown=False, incremental=True)[
        "broker_logger"].values()
    # kafka-python answers a refusal as "[Error <code>] <name>: <message>".
    failed = re.match(r"\[Error (\d+)\] (.*)", str(result)) if result else None
    return (int(failed.group(1)), failed.group(2)) if failed else (0, None)


def debug_lines(broker):
    return broker.log_path.read_text(errors="replace").count("DEBUG")


def connect_once(broker):
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        kafka_wire.api_versions(conn)


def test_a_logger_level_is_described_changed_and_removed_without_a_restart(broker):
    client = admin(broker)
    try:
        before = levels(client)
        assert before["root"] == "INFO"
        assert before["tidelog_broker::net"] == "INFO"
        assert before["openraft"] == "WARN"

        connect_once(broker)
        quiet = debug_lines(broker)
        assert alter(client, {"tidelog_broker::net": (AlterConfigOp.SET, "DEBUG")}) == (0, None)
        assert levels(client)["tidelog_broker::net"] == "DEBUG"
        # A new connection is now logged at DEBUG by tidelog_broker::net.
        connect_once(broker)
        wait_until(lambda: debug_lines(broker) > quiet, 10, "a DEBUG line from tidelog_broker::net")

        assert alter(client, {"tidelog_broker::net": (AlterConfigOp.DELETE, None)}) == (0, None)
        assert levels(client)["tidelog_broker::net"] == "INFO"
        settled = debug_lines(broker)
        connect_once(broker)
        time.sleep(0.5)
        assert debug_lines(broker) == settled
    finally:
        client.close()


@pytest.mark.parametrize("configs, code", [
    ({"root": (AlterConfigOp.SET, "LOUD")}, INVALID_CONFIG),
    ({"kafka.server.ReplicaManager": (AlterConfigOp.SET, "DEBUG")}, INVALID_CONFIG),
    ({"root": (AlterConfigOp.DELETE, None)}, INVALID_REQUEST),
    ({"tidelog": (AlterConfigOp.APPEND, "DEBUG")}, INVALID_REQUEST),
])
def test_kafkas_refusals(shared_broker, configs, code):
    client = admin(shared_broker)
    try:
        got, _ = alter(client, configs)
        assert got == code
        assert levels(client)["root"] == "INFO"
    finally:
        client.close()


def refused(broker, api, body):
    """The error code and message of the one resource of a DescribeConfigs v1 or
    AlterConfigs v1 answer."""
    with kafka_wire.Connection.to(broker.bootstrap) as conn:
        r = kafka_wire.Reader(conn.call(api, 1, body))
    r.i32()  # throttle
    (n,) = struct.unpack(">i", r.take(4))
    assert n == 1
    return r.i16(), r.string()


def test_another_brokers_loggers_and_the_legacy_api_are_refused(shared_broker):
    # kafka-python sends a broker's loggers to that broker itself: by hand, then.
    describe = (struct.pack(">i", 1) + struct.pack(">b", 8) + kafka_wire.kstring("2")
                + struct.pack(">i", -1) + struct.pack(">b", 0))
    code, message = refused(shared_broker, API_DESCRIBE_CONFIGS, describe)
    assert code == INVALID_REQUEST and "expected 1" in message
    # AlterConfigs v1 of BROKER_LOGGER "1": Kafka refuses the deprecated API for it.
    alter = (struct.pack(">i", 1) + struct.pack(">b", 8) + kafka_wire.kstring("1")
             + struct.pack(">i", 1) + kafka_wire.kstring("root") + kafka_wire.kstring("DEBUG")
             + struct.pack(">b", 0))
    code, message = refused(shared_broker, API_ALTER_CONFIGS, alter)
    assert code == INVALID_REQUEST and "BROKER_LOGGER" in message
