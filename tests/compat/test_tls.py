"""Listeners and TLS: real clients over SSL listeners, mutual TLS, a PLAINTEXT and an
SSL listener on one broker, and the wrong protocol on either port.

Certificates are made in the test itself (pki.py): a CA, a server certificate for
127.0.0.1/localhost and a client certificate (`O=tidelog tests, CN=client`).
"""

import os
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTopicPartition

from compat_helpers import (
    DeliveryLog,
    assign_from,
    client_logger,
    consume_n,
    consumer,
    create_topic,
    free_port,
    produce_all,
    producer,
    unique,
    wait_until,
)
from broker_process import Broker, BrokerError
from kafka_wire import request
from pki import make_pki, openssl


SOCKET_TIMEOUT_S = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("client",))


class ListenersBroker(Broker):
    """A broker started with `listeners` (PLAINTEXT and SSL ports) instead of --listen."""

    def __init__(self, workdir, settings):
        super().__init__(workdir, settings)
        self.ssl_port = free_port()
        self.own_listeners = "listeners" not in self.settings
        if self.own_listeners:
            self.settings["listeners"] = self.listeners()

    def listeners(self):
        return f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port}"

    def choose_new_ports(self):
        if not self.own_listeners:
            return False
        super().choose_new_ports()
        self.ssl_port = free_port()
        self.settings["listeners"] = self.listeners()
        return True

    @property
    def ssl_bootstrap(self):
        return f"127.0.0.1:{self.ssl_port}"

    def log_text(self):
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def tls_broker(tmp_path_factory, pki):
    made = []

    def make(extra=None, start=True):
        settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki / "keystore.pem")}
        settings.update(extra or {})
        broker = ListenersBroker(tmp_path_factory.mktemp("tls-broker"), settings)
        made.append(broker)
        if start:
            broker.start()
        return broker

    yield make
    for broker in made:
        broker.cleanup()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def ssl_conf(pki, client_cert=False):
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem")}
    if client_cert:
        conf["ssl.certificate.location"] = str(pki / "client.pem")
        conf["ssl.key.location"] = str(pki / "client.key")
    return conf


def roundtrip_confluent(bootstrap, conf, count=2000):
    """Produce keyed binary records with headers through `bootstrap` and read them back."""
    admin_conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, **conf}
    topic = unique("tls")
    client = AdminClient(admin_conf, logger=client_logger("admin"))
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)], operation_timeout=20, request_timeout=20,
    )
    futures[topic].result(timeout=30)
    records = [
        (i, os.urandom(8) + struct.pack(">i", i), os.urandom(1 + i % 3000), [("h", os.urandom(4))], None)
        for i in range(count)
    ]
    log = DeliveryLog()
    prod = producer(bootstrap, **conf)
    produce_all(prod, topic, records, log, flush_timeout=120)
    assert not log.failed, list(log.failed.items())[:3]
    cons = consumer(bootstrap, **conf)
    try:
        assign_from(cons, topic, 2, 0)
        messages, _ = consume_n(cons, count, timeout=60)
    finally:
        cons.close()
    sent = {(key, value, tuple(headers)) for _, key, value, headers, _ in records}
    got = {(m.key(), m.value(), tuple(m.headers() or [])) for m in messages}
    assert len(messages) == count
    assert got == sent


def test_confluent_kafka_round_trip_over_ssl(tls_broker, pki):
    broker = tls_broker()
    roundtrip_confluent(broker.ssl_bootstrap, ssl_conf(pki))


def test_an_encrypted_pkcs8_key_is_read_with_ssl_key_password(tls_broker, pki):
    # openssl's encrypted PKCS#8 (PBES2: PBKDF2 + AES-256-CBC), as Kafka's PEM keystore reads it.
    openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "server.key", "-out", "server-enc.key",
            "-passout", "pass:key-secret", cwd=pki)
    encrypted = pki / "keystore-enc.pem"
    encrypted.write_text((pki / "server-enc.key").read_text() + (pki / "server.pem").read_text())
    assert "ENCRYPTED PRIVATE KEY" in encrypted.read_text()
    broker = tls_broker({"ssl.keystore.location": str(encrypted), "ssl.key.password": "key-secret"})
    roundtrip_confluent(broker.ssl_bootstrap, ssl_conf(pki), count=50)

    wrong = tls_broker({"ssl.keystore.location": str(encrypted), "ssl.key.password": "not-it"}, start=False)
    with pytest.raises(BrokerError, match="cannot decrypt the private key with ssl.key.password"):
        wrong.start()
    # The harness logs its command line (with the setting); the broker's own lines never
    # show the password.
    broker_lines = [line for line in wrong.log_text().splitlines() if not line.startswith("=====")]
    assert not any("not-it" in line for line in broker_lines), broker_lines


def test_kafka_python_over_ssl(tls_broker, pki):
    broker = tls_broker()
    topic = unique("tls-kp")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(pki / "ca.pem")}
    prod = KafkaProducer(bootstrap_servers=broker.ssl_bootstrap, acks="all", **tls)
    sent = [(b"k%d" % i, os.urandom(100 + i)) for i in range(200)]
    try:
        for key, value in sent:
            prod.send(topic, key=key, value=value, partition=0)
        prod.flush(timeout=60)
    finally:
        prod.close(timeout=10)
    cons = KafkaConsumer(bootstrap_servers=broker.ssl_bootstrap, consumer_timeout_ms=10000,
                         enable_auto_commit=False, **tls)
    try:
        tp = KTopicPartition(topic, 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in cons.poll(timeout_ms=1000).values():
                got.extend((r.key, r.value) for r in records)
    finally:
        cons.close()
    assert got == sent


def tls_client(pki, port, cert=False):
    """A TLS socket to the broker, verifying it with the test CA."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def api_versions_answered(sock):
    """Sends ApiVersions v0; True if an answer with its correlation id comes back."""
    sock.sendall(request(18, 0, 7))
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        if not chunk:
            return False
        head += chunk
    return struct.unpack(">i", head[4:8])[0] == 7


def test_mutual_tls_refuses_a_client_without_a_certificate(tls_broker, pki):
    broker = tls_broker({
        "ssl.client.auth": "required",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
    })
    # Without a certificate: the broker ends the handshake (in TLS 1.3 the client
    # learns it at its first read).
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with tls_client(pki, broker.ssl_port) as sock:
            if not api_versions_answered(sock):
                raise ConnectionError("closed without an answer")
    no_cert = AdminClient({"bootstrap.servers": broker.ssl_bootstrap, "socket.timeout.ms": 3000,
                           **ssl_conf(pki)}, logger=client_logger("admin"))
    with pytest.raises(KafkaException):
        no_cert.list_topics(timeout=5)
    # With one signed by the truststore's CA, everything works.
    with tls_client(pki, broker.ssl_port, cert=True) as sock:
        assert api_versions_answered(sock)
    roundtrip_confluent(broker.ssl_bootstrap, ssl_conf(pki, client_cert=True), count=300)
    wait_until(lambda: "TLS handshake failed" in broker.log_text(), 10, "the refused handshake in the log")


def brokers_seen(bootstrap, conf):
    client = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, **conf},
                         logger=client_logger("admin"))
    md = client.list_topics(timeout=20)
    return {(b.host, b.port) for b in md.brokers.values()}


def test_each_listener_answers_metadata_with_its_own_endpoint(tls_broker, pki):
    broker = tls_broker(start=False)
    # The SSL listener is advertised under another name than it binds, to tell the two
    # answers apart.
    broker.settings["advertised.listeners"] = (
        f"PLAINTEXT://127.0.0.1:{broker.port},SSL://localhost:{broker.ssl_port}")
    broker.start()
    assert brokers_seen(broker.bootstrap, {}) == {("127.0.0.1", broker.port)}
    assert brokers_seen(broker.ssl_bootstrap, ssl_conf(pki)) == {("localhost", broker.ssl_port)}
    # A consumer group's coordinator is found on the listener it asked through.
    topic = create_topic(broker.bootstrap, unique("two-listeners"))
    prod = producer(broker.bootstrap)
    prod.produce(topic, value=b"plain")
    assert prod.flush(30) == 0
    group = consumer(broker.ssl_bootstrap, **ssl_conf(pki), **{"group.id": unique("g")})
    try:
        group.subscribe([topic])
        messages, _ = consume_n(group, 1, timeout=60)
        assert [m.value() for m in messages] == [b"plain"]
        group.commit(message=messages[0], asynchronous=False)
        committed = group.committed([TopicPartition(topic, 0)], timeout=20)
        assert committed[0].offset == 1
    finally:
        group.close()


def test_the_wrong_protocol_on_either_port_is_closed_and_logged(tls_broker, pki):
    broker = tls_broker()
    # TLS on the plaintext port: the ClientHello is not read as a 369 MB frame.
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with tls_client(pki, broker.port):
            pass
    wait_until(lambda: "TLS handshake on plaintext listener PLAINTEXT" in broker.log_text(), 10,
               "the TLS-on-plaintext log line")
    # Plaintext Kafka on the SSL port.
    with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=SOCKET_TIMEOUT_S) as sock:
        try:
            assert not api_versions_answered(sock)
        except ConnectionError:
            pass
    wait_until(lambda: "plaintext (not TLS) connection on SSL listener SSL" in broker.log_text(), 10,
               "the plaintext-on-TLS log line")
    # The broker goes on serving both listeners.
    assert brokers_seen(broker.bootstrap, {}) == {("127.0.0.1", broker.port)}
    with tls_client(pki, broker.ssl_port) as sock:
        assert api_versions_answered(sock)


def test_a_sasl_listener_with_kafkas_default_mechanism_refuses_to_start(tls_broker):
    # sasl.enabled.mechanisms defaults to GSSAPI, as in Kafka; tidelog does not serve it
    # (test_sasl.py has the working SASL listeners).
    broker = tls_broker({"listeners": f"SASL_SSL://127.0.0.1:{free_port()}"}, start=False)
    with pytest.raises(BrokerError, match="GSSAPI is not served by tidelog"):
        broker.start()


class BothListenFlags(Broker):
    """--listen and `listeners` together (the harness passes only one of them)."""

    def command(self):
        return super().command() + ["--listen", self.bootstrap]


def test_listen_and_listeners_together_are_refused(tmp_path):
    # Both would leave one of them unused.
    broker = BothListenFlags(tmp_path, {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    try:
        with pytest.raises(BrokerError, match="--listen and the `listeners` setting"):
            broker.start()
    finally:
        broker.cleanup()


def test_enabled_protocols_requested_client_auth_and_the_handshake_timeout(tls_broker, pki):
    broker = tls_broker({
        "ssl.enabled.protocols": "TLSv1.3",
        "listener.name.ssl.ssl.client.auth": "requested",
        "ssl.truststore.location": str(pki / "ca.pem"),
    })
    # TLS 1.2 only: refused.
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        raw = socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=SOCKET_TIMEOUT_S)
        with ctx.wrap_socket(raw, server_hostname="localhost"):
            pass
    # requested: with or without a certificate.
    with tls_client(pki, broker.ssl_port) as sock:
        assert sock.version() == "TLSv1.3"
        assert api_versions_answered(sock)
    with tls_client(pki, broker.ssl_port, cert=True) as sock:
        assert api_versions_answered(sock)
    # A client that never starts its handshake is closed after the handshake timeout.
    with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=20) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - started < 15
    wait_until(lambda: "TLS handshake not finished within" in broker.log_text(), 10,
               "the handshake timeout in the log")


def test_kcat_with_a_client_certificate(tls_broker, pki):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail("kcat is not installed (./scripts/test installs it)", pytrace=False)
    broker = tls_broker({"ssl.client.auth": "required", "ssl.truststore.location": str(pki / "ca.pem")})
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki / 'ca.pem'}",
           "-X", f"ssl.certificate.location={pki / 'client.pem'}", "-X", f"ssl.key.location={pki / 'client.key'}"]
    topic = unique("kcat-tls")
    lines = [f"k{i}:value {i}" for i in range(100)]
    subprocess.run([kcat, "-P", "-b", broker.ssl_bootstrap, "-t", topic, "-K", ":", *tls],
                   input=("\n".join(lines) + "\n").encode(), check=True, capture_output=True, timeout=60)
    out = subprocess.run([kcat, "-C", "-b", broker.ssl_bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "%k:%s\\n", *tls], check=True, capture_output=True, timeout=60)
    assert out.stdout.decode().splitlines() == lines
