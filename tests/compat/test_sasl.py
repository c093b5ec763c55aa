"""SASL on SASL_PLAINTEXT and SASL_SSL listeners with real clients: confluent-kafka
(SCRAM-SHA-512 over SASL_SSL), kafka-python (SCRAM-SHA-256), kcat (PLAIN); refused
credentials, requests before authentication, oversized pre-authentication frames,
KIP-368 re-authentication, and `tidelog user` create/list/delete.

Each broker has a PLAINTEXT listener too: it stands for the operator's loopback
listener through which the first SCRAM users are created.
"""

import os
import shutil
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from broker_process import SaslListenersBroker
from compat_helpers import (
    DeliveryLog,
    client_logger,
    create_topic,
    kafka_python_roundtrip,
    producer,
    unique,
    wait_until,
)
from kafka_wire import Connection, api_versions, request
from pki import make_pki
from test_tls import roundtrip_confluent

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)
CLIENT_TIMEOUT_S = 30
# connection.failed.authentication.delay.ms is 100 by default; a refusal must come
# well within this.
PROMPT_S = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("sasl-pki"))


class SaslBroker(SaslListenersBroker):
    """PLAINTEXT, SASL_PLAINTEXT (PLAIN, SCRAM) and SASL_SSL (SCRAM-SHA-512) listeners."""

    def __init__(self, workdir, pki, extra=None):
        super().__init__(workdir, pki / "keystore.pem")
        self.settings.update({
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        })
        self.settings.update(extra or {})


@pytest.fixture
def sasl_broker(tmp_path_factory, pki):
    made = []

    def make(extra=None):
        broker = SaslBroker(tmp_path_factory.mktemp("sasl-broker"), pki, extra)
        made.append(broker)
        broker.start()
        return broker

    yield make
    for broker in made:
        broker.cleanup()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def add_scram_user(bootstrap, user, password, mechanism, iterations=8192):
    """Through the PLAINTEXT listener, as Kafka's admin client does it."""
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=client_logger("admin"))
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())
    futures = admin.alter_user_scram_credentials([upsert])
    futures[user].result(timeout=CLIENT_TIMEOUT_S)


def scram_conf(pki, mechanism, user, password, protocol="SASL_SSL"):
    conf = {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(pki / "ca.pem")
    return conf


def test_confluent_scram_sha_512_over_sasl_ssl_round_trip(sasl_broker, pki):
    broker = sasl_broker()
    add_scram_user(broker.bootstrap, "bob", "bob-secret", ScramMechanism.SCRAM_SHA_512)
    conf = scram_conf(pki, "SCRAM-SHA-512", "bob", "bob-secret")
    roundtrip_confluent(broker.sasl_ssl_bootstrap, conf, count=500)
    assert broker.authentications("SASL_SSL", "SCRAM-SHA-512", "success") >= 1
    # tidelog writes no credential to its log (the harness's own "===== start" line
    # repeats the command line, JAAS config included).
    log = "\n".join(line for line in broker.log_path.read_text(errors="replace").splitlines()
                    if not line.startswith("===== start"))
    assert "bob-secret" not in log and "alice-secret" not in log


def test_kafka_python_scram_sha_256(sasl_broker, pki):
    broker = sasl_broker()
    add_scram_user(broker.bootstrap, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_256, iterations=4096)
    topic = create_topic(broker.bootstrap, unique("sasl-kp"), 1)
    sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="carol", sasl_plain_password="carol-secret")
    values = [os.urandom(1 + i % 500) for i in range(200)]
    got = kafka_python_roundtrip(broker.sasl_bootstrap, topic, values, timeout=CLIENT_TIMEOUT_S, **sasl)
    assert got == values


def kcat_path():
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (./scripts/test installs it)", pytrace=False)
    return path


def test_kcat_plain_over_sasl_plaintext(sasl_broker):
    broker = sasl_broker()
    kcat = kcat_path()
    topic = create_topic(broker.bootstrap, unique("sasl-kcat"), 1)
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
            "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    lines = [f"line-{i}-{os.urandom(4).hex()}" for i in range(50)]
    subprocess.run([kcat, "-P", "-b", broker.sasl_bootstrap, "-t", topic, *auth],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=60, capture_output=True)
    out = subprocess.run([kcat, "-C", "-b", broker.sasl_bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                          *auth], text=True, check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines
    # The wrong password: kcat reports the broker's refusal and exits non-zero.
    bad = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
           "-X", "sasl.username=alice", "-X", "sasl.password=wrong"]
    started = time.monotonic()
    refused = subprocess.run([kcat, "-L", "-b", broker.sasl_bootstrap, "-m", "5", *bad],
                             text=True, timeout=60, capture_output=True)
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr + refused.stdout, refused.stderr
    assert time.monotonic() - started < PROMPT_S + 5


def test_wrong_password_fails_promptly_with_an_authentication_error(sasl_broker, pki):
    broker = sasl_broker()
    add_scram_user(broker.bootstrap, "dave", "dave-secret", ScramMechanism.SCRAM_SHA_512)
    errors = []
    conf = {"bootstrap.servers": broker.sasl_ssl_bootstrap, "error_cb": errors.append,
            **scram_conf(pki, "SCRAM-SHA-512", "dave", "not-it")}
    started = time.monotonic()
    admin = AdminClient(conf, logger=client_logger("admin"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=PROMPT_S)

    def refused():
        admin.poll(0.2)  # error_cb runs from poll
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_until(refused, PROMPT_S, "an authentication error from librdkafka")
    assert time.monotonic() - started < 2 * PROMPT_S
    message = next(str(e) for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed during authentication due to invalid credentials" in message, message
    # (kafka-python 3.0 reads the broker's close before its SaslAuthenticate answer and
    # retries the bootstrap until its timeout, so it is not asserted here.)
    assert broker.authentications("SASL_SSL", "SCRAM-SHA-512", "failure") >= 1


METADATA = 3
SASL_HANDSHAKE = 17


def test_requests_before_authentication_close_the_connection(sasl_broker):
    broker = sasl_broker()
    host, port = broker.sasl_bootstrap.rsplit(":", 1)
    # ApiVersions is answered before authentication ...
    with Connection(host, int(port)) as conn:
        error, ranges = api_versions(conn)
        assert error == 0 and SASL_HANDSHAKE in ranges
        # ... a Metadata request is not: the connection is closed without an answer.
        conn.send(request(METADATA, 1, 7, struct.pack(">i", -1)))
        assert conn.wait_closed(timeout=PROMPT_S) == 0
    # An ApiVersions at a version the broker does not speak is answered
    # UNSUPPORTED_VERSION, and the client may ask again lower before its handshake.
    with Connection(host, int(port)) as conn:
        conn.send(request(18, 99, 3))
        _, response = conn.recv_response(timeout=PROMPT_S)
        assert struct.unpack(">h", response[:2])[0] == 35  # UNSUPPORTED_VERSION
        error, _ = api_versions(conn)
        assert error == 0
        conn.send(request(SASL_HANDSHAKE, 1, 4, struct.pack(">h", 5) + b"PLAIN"))
        _, response = conn.recv_response(timeout=PROMPT_S)
        assert struct.unpack(">h", response[:2])[0] == 0
    # An unknown mechanism is answered with the enabled ones, then the connection closes.
    with Connection(host, int(port)) as conn:
        body = struct.pack(">h", 6) + b"GSSAPI"
        conn.send(request(SASL_HANDSHAKE, 1, 1, body))
        _, response = conn.recv_response(timeout=PROMPT_S)
        (code,) = struct.unpack(">h", response[:2])
        assert code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert b"PLAIN" in response and b"SCRAM-SHA-512" in response
        conn.wait_closed(timeout=PROMPT_S)


def test_an_oversized_pre_authentication_frame_closes_the_connection(sasl_broker):
    broker = sasl_broker()
    host, port = broker.sasl_bootstrap.rsplit(":", 1)
    # A frame size within sasl.server.max.receive.size: the broker waits for its body.
    with Connection(host, int(port)) as conn:
        conn.send(struct.pack(">i", 1000))
        with pytest.raises(TimeoutError):
            conn.wait_closed(timeout=1.0)
    # One above it is refused before any body is read.
    with Connection(host, int(port)) as conn:
        conn.send(struct.pack(">i", 524288 + 1))
        assert conn.wait_closed(timeout=PROMPT_S) == 0
    # After authentication the normal limit (socket.request.max.bytes) applies; a
    # PLAINTEXT listener has no SASL limit at all.
    with Connection.to(broker.bootstrap) as conn:
        conn.send(struct.pack(">i", 524288 + 1))
        with pytest.raises(TimeoutError):
            conn.wait_closed(timeout=1.0)


def test_reauthentication_keeps_a_producer_working(sasl_broker):
    lifetime_ms = 1500
    broker = sasl_broker({"listener.name.sasl_plaintext.connections.max.reauth.ms": str(lifetime_ms)})
    topic = create_topic(broker.bootstrap, unique("sasl-reauth"), 1)
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    prod = producer(broker.sasl_bootstrap, **conf)
    log = DeliveryLog()
    sent = 0
    deadline = time.monotonic() + 4.5 * lifetime_ms / 1000
    while time.monotonic() < deadline:
        prod.produce(topic, value=f"v{sent}".encode(), on_delivery=log.callback(sent))
        sent += 1
        prod.poll(0.05)
    assert prod.flush(CLIENT_TIMEOUT_S) == 0
    assert not log.failed, list(log.failed.items())[:3]
    assert len(log.acked) == sent
    # The producer's connections re-authenticated (one success per lifetime at least)
    # instead of being closed and reopened.
    successes = broker.authentications("SASL_PLAINTEXT", "PLAIN", "success")
    assert successes >= 4, successes
    assert broker.authentications("SASL_PLAINTEXT", "PLAIN", "failure") == 0


def test_an_expired_session_that_does_not_reauthenticate_is_closed(sasl_broker):
    broker = sasl_broker({"connections.max.reauth.ms": "1000"})
    host, port = broker.sasl_bootstrap.rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        mechanism = b"PLAIN"
        conn.send(request(SASL_HANDSHAKE, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        conn.recv_response(timeout=PROMPT_S)
        token = b"\0alice\0alice-secret"
        conn.send(request(36, 1, 2, struct.pack(">i", len(token)) + token))
        _, response = conn.recv_response(timeout=PROMPT_S)
        (code,) = struct.unpack(">h", response[:2])
        assert code == 0
        (lifetime,) = struct.unpack(">q", response[-8:])
        assert lifetime == 1000
        # Within its lifetime a request is served ...
        error, _ = api_versions(conn)
        assert error == 0
        time.sleep(1.2)
        # ... past it, anything but a re-authentication closes the connection.
        conn.send(request(18, 0, 9))
        conn.wait_closed(timeout=PROMPT_S)


def tidelog(*args, check=True):
    from broker_process import tidelog_bin
    return subprocess.run([str(tidelog_bin()), *args], text=True, capture_output=True, timeout=60, check=check)


def authentication_refused(bootstrap, conf):
    """Whether librdkafka reports an authentication error for `conf` (within PROMPT_S)."""
    errors = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf},
                        logger=client_logger("admin"))
    deadline = time.monotonic() + PROMPT_S
    while time.monotonic() < deadline:
        admin.poll(0.2)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return True
        try:
            admin.list_topics(timeout=1)
            return False
        except KafkaException:
            pass
    return False


def test_tidelog_user_create_list_delete(sasl_broker, pki, tmp_path):
    broker = sasl_broker()
    plain = ["--bootstrap", broker.bootstrap]
    created = tidelog("user", "create", "erin", "--mechanism", "SCRAM-SHA-256", "--password", "erin-secret",
                      "--iterations", "8192", *plain)
    assert "erin" in created.stdout
    tidelog("user", "create", "erin", "--mechanism", "SCRAM-SHA-512", "--password", "erin-512", *plain)
    listed = tidelog("user", "list", *plain).stdout.splitlines()
    assert "erin\tSCRAM-SHA-256\titerations=8192" in listed, listed
    assert "erin\tSCRAM-SHA-512\titerations=4096" in listed, listed
    # Kafka's bounds on the iteration count, as the broker answers them.
    refused = tidelog("user", "create", "frank", "--password", "x", "--iterations", "100", *plain, check=False)
    assert refused.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in refused.stderr, refused.stderr
    # erin authenticates with either mechanism, also through the CLI's --command-config.
    conf = scram_conf(None, "SCRAM-SHA-256", "erin", "erin-secret", protocol="SASL_PLAINTEXT")
    assert not authentication_refused(broker.sasl_bootstrap, conf)
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        "    username=\"erin\" password=\"erin-512\";\n")
    via_sasl = tidelog("user", "list", "--bootstrap", broker.sasl_bootstrap, "--command-config", str(props))
    assert "erin\tSCRAM-SHA-512\titerations=4096" in via_sasl.stdout.splitlines()
    # SASL_SSL: TLS to the SASL_SSL listener, verified against the test CA.
    ssl_props = tmp_path / "ssl.properties"
    ssl_props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=erin\n"
        f"sasl.password=erin-512\nssl.ca.location={pki / 'ca.pem'}\n")
    via_ssl = tidelog("topic", "list", "--bootstrap", broker.sasl_ssl_bootstrap, "--command-config", str(ssl_props),
                      "--api-timeout-ms", "10000", check=False)
    assert via_ssl.returncode == 0, via_ssl.stderr
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                     "sasl.password=nope\n")
    failed = tidelog("topic", "list", "--bootstrap", broker.sasl_bootstrap, "--command-config", str(wrong),
                     "--api-timeout-ms", "5000", check=False)
    assert failed.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in failed.stderr, failed.stderr
    # Deleted: listed no more, and refused.
    deleted = tidelog("user", "delete", "erin", *plain)
    assert "SCRAM-SHA-256" in deleted.stdout and "SCRAM-SHA-512" in deleted.stdout
    assert not any(line.startswith("erin\t") for line in tidelog("user", "list", *plain).stdout.splitlines())
    assert authentication_refused(broker.sasl_bootstrap, conf)
    again = tidelog("user", "delete", "erin", *plain, check=False)
    assert again.returncode == 1 and "no SCRAM credential" in again.stderr, again.stderr


def test_handshake_v0_takes_raw_tokens(sasl_broker):
    # SaslHandshake v0: the PLAIN message follows as a bare size-prefixed token, and
    # the answer is one too (empty for PLAIN), as Kafka's SaslServerAuthenticator does.
    broker = sasl_broker()
    host, port = broker.sasl_bootstrap.rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        mechanism = b"PLAIN"
        conn.send(request(SASL_HANDSHAKE, 0, 1, struct.pack(">h", len(mechanism)) + mechanism))
        _, response = conn.recv_response(timeout=PROMPT_S)
        assert struct.unpack(">h", response[:2])[0] == 0
        token = b"\0alice\0alice-secret"
        conn.send(struct.pack(">i", len(token)) + token)
        deadline = time.monotonic() + PROMPT_S
        assert conn._recv_exact(4, deadline) == b"\0\0\0\0"
        # Authenticated: other requests are served now.
        error, _ = api_versions(conn)
        assert error == 0
    # A wrong password on v0 has no answer to carry the error: the connection closes.
    with Connection(host, int(port)) as conn:
        conn.send(request(SASL_HANDSHAKE, 0, 1, struct.pack(">h", 5) + b"PLAIN"))
        conn.recv_response(timeout=PROMPT_S)
        token = b"\0alice\0wrong"
        conn.send(struct.pack(">i", len(token)) + token)
        assert conn.wait_closed(timeout=PROMPT_S) == 0


def test_the_first_scram_user_comes_from_the_data_dir_before_the_first_start(tmp_path):
    """A broker whose only listener needs SASL and whose authorizer admits super users
    only: its first user is written into the data dir (Kafka's `kafka-storage format
    --add-scram`), applied before the node is ready, and the file is then gone."""
    from broker_process import Broker

    broker = Broker(tmp_path / "only-sasl")
    broker.settings.update({
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker.port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:root",
        "allow.everyone.if.no.acl.found": "false",
    })
    written = tidelog("user", "create", "root", "--data-dir", str(broker.data_dir), "--password", "root-secret")
    pending = broker.data_dir / "__cluster_metadata" / "bootstrap-scram-credentials.json"
    assert pending.is_file() and str(pending) in written.stdout
    assert "root-secret" not in pending.read_text(), "the password itself must not be written"
    assert oct(pending.stat().st_mode & 0o777) == "0o600"
    try:
        broker.choose_new_ports = lambda: False  # the listener's port is in its settings
        broker.start()
        assert not pending.exists(), "applied credentials are removed from the data dir"
        root = scram_conf(None, "SCRAM-SHA-512", "root", "root-secret", protocol="SASL_PLAINTEXT")
        roundtrip_confluent(broker.bootstrap, root, count=50)  # creates a topic, produces, reads
        wrong = scram_conf(None, "SCRAM-SHA-512", "root", "not-it", protocol="SASL_PLAINTEXT")
        assert authentication_refused(broker.bootstrap, wrong)
        # The credential is in the metadata: it survives a restart with no file.
        broker.stop()
        broker.start()
        listed = tidelog("user", "list", "--bootstrap", broker.bootstrap, "--command-config",
                         str(_props(tmp_path, "root", "root-secret"))).stdout.splitlines()
        assert listed == ["root\tSCRAM-SHA-512\titerations=4096"], listed
        # Too late now: the node has started.
        late = tidelog("user", "create", "eve", "--data-dir", str(broker.data_dir), "--password", "x", check=False)
        assert late.returncode == 1 and "has started before" in late.stderr, late.stderr
    finally:
        broker.cleanup()


def _props(tmp_path, user, password):
    props = tmp_path / f"{user}.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                     f"sasl.username={user}\nsasl.password={password}\n")
    return props
