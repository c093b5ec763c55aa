"""Client quotas (KIP-13, KIP-124, KIP-546) with real clients.

AlterClientQuotas and DescribeClientQuotas round trips through kafka-python's protocol
classes (its admin client has no quota calls) and the tidelog CLI, Kafka's checks and
error codes, quotas surviving a restart, and enforcement: a producer or a consumer over
its byte-rate quota is throttled near its quota (librdkafka reports throttle events
through `throttle_cb`) while a client without a quota on the same broker is not, and a
client over its request_percentage quota is muted while another is not.

The brokers here measure rates over 4 one-second samples (quota.window.num=4) instead
of Kafka's 11, so a test reaches steady state in seconds; the math is the same."""

import json
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from broker_process import tidelog_bin
from compat_helpers import create_topic, unique

FAST_WINDOWS = {"quota.window.num": "4", "quota.window.size.seconds": "1"}
INVALID_REQUEST = 42


def _send(client, request):
    async def go():
        return await client._manager.send(request, node_id=1)
    return client._manager.run(go)


def _alter(client, entries, validate_only=False):
    """entries: [(entity dict, {key: value or None})] -> [(error_code, message)]."""
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(entries=[entry(
        entity=[entry.EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
        ops=[entry.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
             for k, v in ops.items()])
        for entity, ops in entries], validate_only=validate_only)
    return [(e.error_code, e.error_message) for e in _send(client, request).entries]


def _describe(client, components, strict=False):
    """components: [(entity type, match type, match)] -> {entity tuple: {key: value}}."""
    component = DescribeClientQuotasRequest.ComponentData
    answer = _send(client, DescribeClientQuotasRequest(
        components=[component(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict))
    assert answer.error_code == 0, answer.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in answer.entries}


def _admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap)


def _set_quota(broker, entity, ops):
    client = _admin(broker)
    try:
        assert _alter(client, [(entity, ops)]) == [(0, None)]
    finally:
        client.close()


def _side_by_side(run, bootstrap, topic, client_ids, seconds):
    """Runs `run(bootstrap, topic, client_id, seconds, results)` for every client id at
    once; returns {client id: (start, [(time, bytes)], [throttle ms])}."""
    results = {}
    threads = [threading.Thread(target=run, args=(bootstrap, topic, cid, seconds, results))
               for cid in client_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == set(client_ids), results.keys()
    return results


def _cli(broker, *args):
    done = subprocess.run([str(tidelog_bin()), "quota", *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_alter_and_describe_round_trip_with_kafkas_checks(broker_factory):
    broker = broker_factory()
    client = _admin(broker)
    try:
        results = _alter(client, [
            ({"user": "alice"}, {"producer_byte_rate": 1024, "request_percentage": 12.5}),
            ({"user": "alice", "client-id": None}, {"consumer_byte_rate": 2048}),
            ({"user": None}, {"producer_byte_rate": 4096}),
            ({"client-id": "app"}, {"consumer_byte_rate": 512}),
            ({"ip": "10.0.0.1"}, {"connection_creation_rate": 10}),
            ({"user": "bob"}, {"no_such_key": 1}),
            ({"user": "bea"}, {"producer_byte_rate": 1.5}),
            ({"user": "ben"}, {"producer_byte_rate": -1}),
            ({"ip": "10.0.0.2", "user": "bob"}, {"connection_creation_rate": 1}),
            ({"group": "g"}, {"producer_byte_rate": 1}),
        ])
        assert [code for code, _ in results[:5]] == [0] * 5, results
        assert [code for code, _ in results[5:]] == [INVALID_REQUEST] * 5, results
        assert results[5][1] == "Invalid configuration key no_such_key"
        assert "Long" in results[6][1]
        # NaN cannot be a rate (and must not turn into a removal on its way).
        (code, message), = _alter(client, [({"user": "alice"}, {"producer_byte_rate": float("nan")})])
        assert code == INVALID_REQUEST and "nan" in message.lower(), message
        # The same entity twice in one request: the second is refused, as in Kafka.
        assert _alter(client, [({"user": "dan"}, {"producer_byte_rate": 1}),
                               ({"user": "dan"}, {"consumer_byte_rate": 1})])[1][0] == INVALID_REQUEST
        assert _alter(client, [({"user": "dan"}, {"producer_byte_rate": None})]) == [(0, None)]

        # validate_only checks and writes nothing.
        assert _alter(client, [({"user": "carol"}, {"producer_byte_rate": 1})],
                      validate_only=True) == [(0, None)]

        everything = _describe(client, [])
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
            (("user", None),): {"producer_byte_rate": 4096.0},
            (("client-id", "app"),): {"consumer_byte_rate": 512.0},
            (("ip", "10.0.0.1"),): {"connection_creation_rate": 10.0},
        }
        # EXACT, DEFAULT and SPECIFIED (any), strict or not, as Kafka's image matches.
        assert set(_describe(client, [("user", 0, "alice")])) == {
            (("user", "alice"),), (("client-id", None), ("user", "alice"))}
        assert set(_describe(client, [("user", 0, "alice")], strict=True)) == {(("user", "alice"),)}
        assert set(_describe(client, [("user", 1, None)])) == {(("user", None),)}
        assert len(_describe(client, [("user", 2, None)])) == 3
        assert set(_describe(client, [("user", 2, None), ("client-id", 1, None)])) == {
            (("client-id", None), ("user", "alice"))}
        assert set(_describe(client, [("client-id", 2, None)], strict=True)) == {(("client-id", "app"),)}
        assert _describe(client, [], strict=True) == {}

        # Removing a key leaves the others; removing the last removes the entity.
        assert _alter(client, [({"user": "alice"}, {"producer_byte_rate": None})]) == [(0, None)]
        assert _alter(client, [({"ip": "10.0.0.1"}, {"connection_creation_rate": None})]) == [(0, None)]
        after = _describe(client, [])
        assert after[(("user", "alice"),)] == {"request_percentage": 12.5}
        assert (("ip", "10.0.0.1"),) not in after
    finally:
        client.close()


def test_quotas_survive_a_restart_and_the_cli_sees_them(broker_factory):
    broker = broker_factory()
    out = _cli(broker, "set", "--user", "alice", "--client-id-default", "producer_byte_rate=1000",
               "consumer_byte_rate=2000")
    assert "producer_byte_rate=1000" in out
    _cli(broker, "set", "--client-id", "app", "request_percentage=50")
    broker.stop()
    broker.start()
    listed = json.loads(_cli(broker, "list", "--output", "json"))["quotas"]
    assert {"entity": {"client-id": None, "user": "alice"},
            "quotas": {"consumer_byte_rate": 2000.0, "producer_byte_rate": 1000.0}} in listed
    assert {"entity": {"client-id": "app"}, "quotas": {"request_percentage": 50.0}} in listed
    client = _admin(broker)
    try:
        assert _describe(client, [("client-id", 0, "app")], strict=True) == {
            (("client-id", "app"),): {"request_percentage": 50.0}}
    finally:
        client.close()
    _cli(broker, "remove", "--user", "alice", "--client-id-default")
    text = _cli(broker, "list")
    assert "alice" not in text and "client-id=app" in text


class Throttles:
    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event.throttle_time)


def _produce_for(bootstrap, topic, client_id, seconds, results):
    throttles = Throttles()
    delivered = []

    def on_delivery(err, msg):
        if err is None:
            delivered.append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1",
                         "linger.ms": 5, "compression.type": "none", "batch.size": 65536,
                         "throttle_cb": throttles})
    value = b"x" * 10_000
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    # What is still queued or in flight past the window is not measured: a throttled
    # producer would need tens of seconds to send it.
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(10)
    results[client_id] = (start, delivered, throttles.events)


def _rate(start, samples, skip, until):
    """Bytes per second between start+skip and start+until."""
    got = sum(n for t, n in samples if start + skip <= t < start + until)
    return got / (until - skip)


def test_a_noisy_producer_is_held_to_its_quota_and_others_are_not(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    topic = create_topic(broker.bootstrap, unique("quota-produce"), 1)
    quota = 200_000
    _set_quota(broker, {"client-id": "noisy"}, {"producer_byte_rate": quota})
    seconds = 8
    results = _side_by_side(_produce_for, broker.bootstrap, topic, ("noisy", "quiet"), seconds)
    noisy_start, noisy, noisy_throttles = results["noisy"]
    quiet_start, quiet, quiet_throttles = results["quiet"]
    # Past the first window's allowance the noisy producer moves at about its quota.
    noisy_rate = _rate(noisy_start, noisy, 3, seconds)
    assert 0.5 * quota < noisy_rate < 1.6 * quota, noisy_rate
    assert noisy_throttles and max(noisy_throttles) > 0, noisy_throttles
    # The other producer, sharing the broker, is not held back.
    quiet_rate = _rate(quiet_start, quiet, 3, seconds)
    assert quiet_rate > 5 * quota, (quiet_rate, noisy_rate)
    assert not any(quiet_throttles), quiet_throttles
    metrics = _metrics(broker)
    assert 'tidelog_quota_throttled_requests_total{quota="produce"}' in metrics


def _metrics(broker):
    import urllib.request
    url = f"http://127.0.0.1:{broker.admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def _consume_for(bootstrap, topic, client_id, seconds, results):
    throttles = Throttles()
    received = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": unique("quota"), "enable.auto.commit": False,
                         "throttle_cb": throttles})
    consumer.assign([TopicPartition(topic, 0, 0)])
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is None:
                    received.append((time.monotonic(), len(msg.value())))
    finally:
        consumer.close()
    results[client_id] = (start, received, throttles.events)


def test_a_greedy_consumer_is_held_to_its_quota_and_others_are_not(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    topic = create_topic(broker.bootstrap, unique("quota-fetch"), 1)
    # Batches well under what the quota allows per fetch: a fetch always carries at
    # least one whole batch, and one larger than quota × window is throttled every time
    # (in Kafka too).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "compression.type": "none", "batch.size": 65536})
    value = b"y" * 10_000
    for _ in range(400):  # 4 MB
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    quota = 200_000
    _set_quota(broker, {"client-id": "greedy"}, {"consumer_byte_rate": quota})
    seconds = 8
    results = _side_by_side(_consume_for, broker.bootstrap, topic, ("greedy", "other"), seconds)
    greedy_start, greedy, greedy_throttles = results["greedy"]
    other_start, other, other_throttles = results["other"]
    # A fetch carries up to quota × (windows - 1) at once, so the greedy consumer
    # moves in bursts; over the run it stays near (at most a little over) its quota.
    greedy_rate = _rate(greedy_start, greedy, 0, seconds)
    assert 0.3 * quota < greedy_rate < 1.6 * quota, greedy_rate
    assert sum(n for _, n in greedy) < 0.5 * 4_000_000
    assert greedy_throttles and max(greedy_throttles) > 0, greedy_throttles
    # The unthrottled consumer read everything.
    assert sum(n for _, n in other) == 4_000_000
    assert not any(other_throttles), other_throttles


def _calls_in(bootstrap, client_id, seconds):
    """ApiVersions v0 calls one connection completes in `seconds`."""
    import kafka_wire
    done = 0
    with kafka_wire.Connection.to(bootstrap) as conn:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            conn.send(kafka_wire.request(18, 0, done + 1, b"", client_id=client_id))
            got, _ = conn.recv_response(timeout=10)
            assert got == done + 1
            done += 1
    return done


def test_request_percentage_mutes_a_busy_client_and_not_the_others(broker_factory):
    broker = broker_factory(FAST_WINDOWS)
    # 0.01 % of one thread: a few hundred tiny requests exceed it.
    _set_quota(broker, {"client-id": "busy"}, {"request_percentage": 0.01})
    idle = _calls_in(broker.bootstrap, "idle", 3)
    busy = _calls_in(broker.bootstrap, "busy", 3)
    # Each throttle mutes the connection for up to one window (1 s here).
    assert busy * 5 < idle, (busy, idle)
    assert 'tidelog_quota_throttled_requests_total{quota="request"}' in _metrics(broker)
