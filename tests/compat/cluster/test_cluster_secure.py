"""A 3-node cluster whose brokers replicate and write transaction markers over a
SASL_SSL inter-broker listener (PLAIN over TLS, certificates verified against the test
CA, host names checked), under StandardAuthorizer: only `User:broker` (the brokers'
own login) may fetch as a replica. Clients use the PLAINTEXT loopback listener, whose
`User:ANONYMOUS` is a super user, as an operator's would be.

The leader of an RF 3, min.insync.replicas=2 topic is killed under acks=all load and
restarted: every acknowledged record is still there, and the followers authenticated
on SASL_SSL (counted in /metrics) to keep the ISR full. A transaction over every
partition then commits (its markers go to the other leaders over SASL_SSL) and a
read_committed consumer sees it.
"""

import re
import socket
import ssl
import struct
import time

import kafka_wire
from cluster_load import ContinuousProducer, acked_ends, check_acknowledged, read_log
from cluster_meta import create_topic, leaders, wait_full_isr, wait_partition
from compat_helpers import assign_from, consume_n, consumer, free_port, producer, unique
from pki import make_pki

PARTITIONS = 3
REJOIN_TIMEOUT_S = 45.0
BROKER_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="broker" password="broker-secret" '
    'user_broker="broker-secret" user_alice="alice-secret";'
)


def secure_settings(pki):
    return {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": BROKER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:broker",
    }


def successful_logins(node):
    return sum(value for series, value in node.metrics().items()
               if series.startswith("tidelog_authentication_total{") and 'listener="SASL_SSL"' in series
               and 'mechanism="PLAIN"' in series and 'result="success"' in series)


def test_replication_over_sasl_ssl_survives_a_leader_kill(cluster_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(settings=secure_settings(pki), start=False)
    for node in cluster.nodes.values():
        node.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{node.port},SASL_SSL://127.0.0.1:{free_port()}"
    cluster.start()

    topic = create_topic(cluster, unique("secure"), PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
    prod = ContinuousProducer(cluster.bootstrap, topic, "s").start()
    try:
        prod.wait_acked(300, 30, "acks=all writes over SASL_SSL replication")
        victim = leaders(cluster, topic, PARTITIONS)[0]
        acked_before = len(prod.acked)
        cluster.node(victim).kill9()
        wait_partition(cluster, topic, 0, lambda s: s.leader >= 0 and s.leader != victim, 10,
                       f"a leader other than killed node {victim}", exclude=(victim,))
        prod.wait_acked(acked_before + 200, 30, f"acks=all writes after killing node {victim}")
        cluster.node(victim).start()
        wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
        prod.wait_acked(len(prod.acked) + 200, 30, "acks=all writes after the restart")
    finally:
        prod.stop(flush_timeout=60)
    prod.check_finished()
    log = read_log(cluster.bootstrap, topic, PARTITIONS, at_least=acked_ends(prod))
    check_acknowledged(prod, log)
    # A transaction over every partition: its coordinator writes the markers of the
    # partitions other nodes lead over SASL_SSL too.
    txn_topic = create_topic(cluster, unique("secure-txn"), PARTITIONS, 3)
    txn = producer(cluster.bootstrap, **{"transactional.id": unique("tx"), "enable.idempotence": True})
    txn.init_transactions(30)
    txn.begin_transaction()
    for p in range(PARTITIONS):
        txn.produce(txn_topic, value=f"committed-{p}".encode(), partition=p)
    txn.commit_transaction(30)
    reader = consumer(cluster.bootstrap, **{"isolation.level": "read_committed"})
    try:
        assign_from(reader, txn_topic, PARTITIONS, 0)
        messages, _ = consume_n(reader, PARTITIONS, 30)
    finally:
        reader.close()
    assert sorted(m.value() for m in messages) == [f"committed-{p}".encode() for p in range(PARTITIONS)]
    # Every node served authenticated followers on SASL_SSL.
    for node in cluster.nodes.values():
        assert successful_logins(node) > 0, f"{node}: no follower authenticated on SASL_SSL"


def test_a_broker_with_the_wrong_inter_broker_password_cannot_replicate(cluster_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(settings=secure_settings(pki), start=False)
    for node in cluster.nodes.values():
        node.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{node.port},SASL_SSL://127.0.0.1:{free_port()}"
    wrong = cluster.node(3)
    wrong.settings["listener.name.sasl_ssl.plain.sasl.jaas.config"] = BROKER_JAAS.replace(
        'password="broker-secret"', 'password="not-the-secret"')
    cluster.start()
    topic = create_topic(cluster, unique("refused"), 1, 3, assignment=[[1, 2, 3]])
    # Node 3 cannot fetch: it leaves the ISR (replica.lag.time.max.ms is 2 s here) and
    # its log says why.
    wait_partition(cluster, topic, 0, lambda s: 3 not in s.isr, 15,
                   "node 3 out of the ISR: it cannot authenticate to the leader")
    assert leaders(cluster, topic, 1)[0] in (1, 2)
    assert re.search(r"SASL authentication to \S+ as broker", wrong.log_text()), wrong.log_tail()


CONTROLLER_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="controller" password="controller-secret" user_controller="controller-secret" '
    'user_alice="alice-secret";'
)
SASL_AUTHENTICATION_FAILED = 58


def controller_sasl_ssl_settings(pki):
    """The controller listener SASL_SSL (PLAIN over TLS), clients on PLAINTEXT, under
    StandardAuthorizer: the quorum admits only its super user `User:controller`."""
    return {
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:controller",
    }


def _tls_connection(pki, address):
    host, port = address.rsplit(":", 1)
    conn = kafka_wire.Connection(host, int(port))
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    conn.sock = context.wrap_socket(conn.sock, server_hostname=host)
    return conn


def _closed_without_answer(conn):
    """Whether the peer closes the connection with no Kafka answer: nothing, or only a
    TLS alert record (content type 21), before the close (a timeout is not a close)."""
    got = b""
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            conn.sock.settimeout(max(0.1, deadline - time.monotonic()))
            chunk = conn.sock.recv(4096)
            if not chunk:
                return got == b"" or got[0] == 0x15
            got += chunk
    except (ConnectionResetError, ssl.SSLError):
        return got == b"" or got[0] == 0x15
    except socket.timeout:
        return False
    return False


def _plain_login(conn, user, password):
    """SaslHandshake v1 + SaslAuthenticate v1 with PLAIN -> SaslAuthenticate's error code."""
    handshake = kafka_wire.Reader(conn.call(17, 1, kafka_wire.kstring("PLAIN")))
    assert handshake.i16() == 0
    token = b"\0" + user.encode() + b"\0" + password.encode()
    answer = kafka_wire.Reader(conn.call(36, 1, struct.pack(">i", len(token)) + token))
    return answer.i16()


def test_a_controller_quorum_over_sasl_ssl_admits_only_its_members(cluster_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    # Three voters and a broker-only node, which reaches the quorum over SASL_SSL too.
    cluster = cluster_factory(size=4, voters=3, settings=controller_sasl_ssl_settings(pki))
    topic = create_topic(cluster, unique("ctl-secure"), PARTITIONS, 3, {"min.insync.replicas": "2"},
                         assignment=[[4, 1, 2], [1, 2, 3], [2, 3, 4]])
    wait_full_isr(cluster, topic, PARTITIONS, REJOIN_TIMEOUT_S)
    prod = producer(cluster.bootstrap, acks="all")
    for p in range(PARTITIONS):
        prod.produce(topic, value=f"v{p}".encode(), partition=p)
    assert prod.flush(30) == 0
    reader = consumer(cluster.bootstrap)
    try:
        assign_from(reader, topic, PARTITIONS, 0)
        messages, _ = consume_n(reader, PARTITIONS, 30)
    finally:
        reader.close()
    assert sorted(m.value() for m in messages) == [f"v{p}".encode() for p in range(PARTITIONS)]

    voter = cluster.node(1)
    # Plaintext on the controller port gets no answer: the TLS handshake fails.
    with kafka_wire.Connection.to(voter.controller_address) as conn:
        conn.send(kafka_wire.request(18, 0, 1))
        assert _closed_without_answer(conn), "the controller port answered plaintext"
    # Over TLS, a wrong password is refused as Kafka refuses it.
    with _tls_connection(pki, voter.controller_address) as conn:
        assert _plain_login(conn, "controller", "wrong") == SASL_AUTHENTICATION_FAILED
    # The right password of a user who is not a super user: authenticated, then closed.
    with _tls_connection(pki, voter.controller_address) as conn:
        assert _plain_login(conn, "alice", "alice-secret") == 0
        conn.send(b"\0\0\0\4ping")
        assert _closed_without_answer(conn), "the controller port served a user who is not a super user"
    log = voter.log_text()
    assert re.search(r"SASL authentication failed", log), voter.log_tail()
    assert re.search(r"admits only super.users.*principal=User:alice", log), voter.log_tail()
