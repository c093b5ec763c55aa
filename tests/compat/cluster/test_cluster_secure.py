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
import time

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
