"""ACL authorization with mTLS principals: one broker with a PLAINTEXT loopback
listener (User:ANONYMOUS, a super user: it creates the ACLs) and an SSL listener that
requires client certificates, mapped to `User:alice` and `User:bob` by
`ssl.principal.mapping.rules`. The certificates are made with openssl (pki.py). Everything shares one broker to keep the suite fast.
"""

import shutil
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from compat_helpers import client_logger, create_topic, unique, wait_until, watermarks
from broker_process import Broker
from pki import make_pki

TIMEOUT_S = 20
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("acl-pki"), clients=("alice", "bob", "carol"))


class AclBroker(Broker):
    def __init__(self, workdir, settings, ssl_port):
        super().__init__(workdir, settings)
        self.ssl_port = ssl_port
        self.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{ssl_port}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    from compat_helpers import free_port
    settings = {
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "keystore.pem"),
        "ssl.client.auth": "required",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.principal.mapping.rules": "RULE:^O=.*,CN=(.*)$/$1/L,RULE:^CN=(.*?),O=.*$/$1/L,DEFAULT",
        "group.initial.rebalance.delay.ms": "0",
    }
    b = AclBroker(tmp_path_factory.mktemp("acl-broker"), settings, free_port())
    b.start()
    yield b
    b.cleanup()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def conf_for(broker, pki, user):
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ssl_port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki / "ca.pem"),
        "ssl.certificate.location": str(pki / f"{user}.pem"),
        "ssl.key.location": str(pki / f"{user}.key"),
        "socket.timeout.ms": 10000,
    }


def super_admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000},
                       logger=client_logger("admin"))


def allow(resource_type, name, principal, op, pattern=ResourcePatternType.LITERAL,
          permission=AclPermissionType.ALLOW):
    return AclBinding(resource_type, name, pattern, principal, "*", op, permission)


def add_acls(broker, *bindings):
    admin = super_admin(broker)  # kept alive until the results are in
    futures = admin.create_acls(list(bindings), request_timeout=TIMEOUT_S)
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def error_code(exc):
    err = exc.args[0]
    return err.code() if isinstance(err, KafkaError) else err


def test_acl_admin_round_trip(broker):
    tag = unique("rt")
    bindings = [
        allow(ResourceType.TOPIC, f"{tag}-a", "User:carol", AclOperation.READ),
        allow(ResourceType.TOPIC, f"{tag}-", "User:carol", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        allow(ResourceType.GROUP, f"{tag}-g", "User:dave", AclOperation.ALL,
              permission=AclPermissionType.DENY),
    ]
    add_acls(broker, *bindings)
    admin = super_admin(broker)

    def described(rtype, name, pattern, principal=None):
        f = AclBindingFilter(rtype, name, pattern, principal, None, AclOperation.ANY, AclPermissionType.ANY)
        return set(admin.describe_acls(f, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S))

    # MATCH: every ACL that applies to the topic (the literal one and the prefix).
    assert described(ResourceType.TOPIC, f"{tag}-a", ResourcePatternType.MATCH) == set(bindings[:2])
    assert described(ResourceType.TOPIC, f"{tag}-a", ResourcePatternType.LITERAL) == {bindings[0]}
    assert described(ResourceType.ANY, None, ResourcePatternType.ANY, "User:dave") == {bindings[2]}
    assert described(ResourceType.TOPIC, f"{tag}-b", ResourcePatternType.MATCH) == {bindings[1]}

    # An invalid creation (MATCH is a filter, not a pattern) fails alone.
    bad = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.PREFIXED, "carol", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    futures = admin.create_acls([bad], request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        futures[bad].result(timeout=TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.INVALID_REQUEST

    f = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:carol", None,
                         AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([f], request_timeout=TIMEOUT_S)[f].result(timeout=TIMEOUT_S)
    assert set(deleted) == set(bindings[:2])
    assert described(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:carol") == set()
    assert described(ResourceType.ANY, None, ResourcePatternType.ANY, "User:dave") == {bindings[2]}


def test_acl_admin_needs_cluster_rights(broker, pki):
    # librdkafka drops DescribeAcls' top-level error (an empty list comes back), so
    # kafka-python asks that one.
    from kafka.admin import (ACLFilter, ACLOperation as KOp, ACLPermissionType as KPerm,
                             ACLResourcePatternType as KPattern, KafkaAdminClient,
                             ResourcePatternFilter, ResourceType as KType)
    from kafka.errors import ClusterAuthorizationFailedError
    kadmin = KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{broker.ssl_port}", security_protocol="SSL",
        ssl_cafile=str(pki / "ca.pem"), ssl_certfile=str(pki / "alice.pem"),
        ssl_keyfile=str(pki / "alice.key"), ssl_check_hostname=False, request_timeout_ms=10000)
    try:
        everything = ACLFilter(principal=None, host=None, operation=KOp.ANY, permission_type=KPerm.ANY,
                               resource_pattern=ResourcePatternFilter(KType.ANY, None, KPattern.ANY))
        with pytest.raises(ClusterAuthorizationFailedError):
            kadmin.describe_acls(everything)
    finally:
        kadmin.close()
    alice = AdminClient(conf_for(broker, pki, "alice"), logger=client_logger("admin"))
    binding = allow(ResourceType.TOPIC, "t", "User:alice", AclOperation.ALL)
    with pytest.raises(KafkaException) as raised:
        alice.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(timeout=TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    with pytest.raises(KafkaException) as raised:
        alice.delete_acls([f], request_timeout=TIMEOUT_S)[f].result(timeout=TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_produce_without_write_is_refused_and_appends_nothing(broker, pki):
    topic = create_topic(broker.bootstrap, unique("acl-produce"))
    add_acls(broker, allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    errors = {}

    def produce_as(user):
        prod = Producer({**conf_for(broker, pki, user), "acks": "all", "message.timeout.ms": 15000,
                         "enable.idempotence": False}, logger=client_logger("producer"))

        def done(err, _msg):
            errors[user] = err

        prod.produce(topic, b"from " + user.encode(), on_delivery=done)
        assert prod.flush(TIMEOUT_S) == 0

    produce_as("bob")
    assert errors["bob"] is not None and errors["bob"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert watermarks(broker.bootstrap, topic, 0) == (0, 0)
    produce_as("alice")
    assert errors["alice"] is None
    assert watermarks(broker.bootstrap, topic, 0) == (0, 1)


def test_read_on_topic_without_read_on_group_consumes_but_cannot_commit(broker, pki):
    topic = create_topic(broker.bootstrap, unique("acl-consume"))
    prod = Producer({"bootstrap.servers": broker.bootstrap}, logger=client_logger("producer"))
    for i in range(3):
        prod.produce(topic, str(i).encode())
    assert prod.flush(TIMEOUT_S) == 0
    group = unique("acl-group")
    # DESCRIBE on the group lets FindCoordinator answer; committing needs READ.
    add_acls(broker, allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "User:alice", AclOperation.DESCRIBE))
    cons = Consumer({**conf_for(broker, pki, "alice"), "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"}, logger=client_logger("consumer"))
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        got = []
        wait_until(lambda: got.extend(m.value() for m in cons.consume(10, 0.5) if not m.error()) or len(got) >= 3,
                   TIMEOUT_S, "three records")
        assert got == [b"0", b"1", b"2"]
        with pytest.raises(KafkaException) as raised:
            cons.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert error_code(raised.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        cons.close()
    # With READ on the group too, the commit goes through.
    add_acls(broker, allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
    cons = Consumer({**conf_for(broker, pki, "alice"), "group.id": group, "enable.auto.commit": False},
                    logger=client_logger("consumer"))
    try:
        cons.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        committed = cons.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == 3
    finally:
        cons.close()


def test_metadata_hides_topics_without_describe(broker, pki):
    seen = create_topic(broker.bootstrap, unique("acl-seen"))
    hidden = create_topic(broker.bootstrap, unique("acl-hidden"))
    add_acls(broker, allow(ResourceType.TOPIC, seen, "User:bob", AclOperation.DESCRIBE))
    bob = AdminClient(conf_for(broker, pki, "bob"), logger=client_logger("admin"))
    topics = bob.list_topics(timeout=TIMEOUT_S).topics
    assert seen in topics
    assert hidden not in topics
    one = bob.list_topics(topic=hidden, timeout=TIMEOUT_S).topics[hidden]
    assert one.error is not None and one.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The super user sees both.
    everything = super_admin(broker).list_topics(timeout=TIMEOUT_S).topics
    assert seen in everything and hidden in everything


def expect_code(future, code):
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    assert error_code(raised.value) == code, raised.value


def test_topic_admin_needs_create_delete_alter_and_configs_rights(broker, pki):
    from confluent_kafka.admin import ConfigResource
    prefix = unique("carol")
    carol = AdminClient(conf_for(broker, pki, "carol"), logger=client_logger("admin"))
    name = f"{prefix}-t"
    new = NewTopic(name, num_partitions=1, replication_factor=1)
    expect_code(carol.create_topics([new], operation_timeout=TIMEOUT_S)[name],
                KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # CREATE on a prefix is enough for topics under it.
    add_acls(broker, allow(ResourceType.TOPIC, f"{prefix}-", "User:carol", AclOperation.CREATE,
                           ResourcePatternType.PREFIXED))
    carol.create_topics([new], operation_timeout=TIMEOUT_S)[name].result(timeout=TIMEOUT_S)
    expect_code(carol.create_partitions([NewPartitions(name, 2)], operation_timeout=TIMEOUT_S)[name],
                KafkaError.TOPIC_AUTHORIZATION_FAILED)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    expect_code(carol.describe_configs([resource], request_timeout=TIMEOUT_S)[resource],
                KafkaError.TOPIC_AUTHORIZATION_FAILED)
    expect_code(carol.delete_topics([name], operation_timeout=TIMEOUT_S)[name],
                KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # ALTER implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    add_acls(broker,
             allow(ResourceType.TOPIC, name, "User:carol", AclOperation.ALTER),
             allow(ResourceType.TOPIC, name, "User:carol", AclOperation.ALTER_CONFIGS),
             allow(ResourceType.TOPIC, name, "User:carol", AclOperation.DELETE))
    carol.create_partitions([NewPartitions(name, 2)], operation_timeout=TIMEOUT_S)[name].result(timeout=TIMEOUT_S)
    configs = carol.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)
    assert "retention.ms" in configs
    carol.delete_topics([name], operation_timeout=TIMEOUT_S)[name].result(timeout=TIMEOUT_S)


def test_group_admin_needs_describe_and_delete(broker, pki):
    topic = create_topic(broker.bootstrap, unique("acl-groups"))
    group = unique("acl-listed")
    # The super user makes a group with a committed offset.
    cons = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group}, logger=client_logger("consumer"))
    try:
        cons.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        cons.close()
    carol = AdminClient(conf_for(broker, pki, "carol"), logger=client_logger("admin"))
    listed = carol.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert group not in {g.group_id for g in listed.valid}
    expect_code(carol.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group],
                KafkaError.GROUP_AUTHORIZATION_FAILED)
    expect_code(carol.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group],
                KafkaError.GROUP_AUTHORIZATION_FAILED)
    add_acls(broker, allow(ResourceType.GROUP, group, "User:carol", AclOperation.DESCRIBE))
    listed = carol.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert group in {g.group_id for g in listed.valid}
    described = carol.describe_consumer_groups([group], request_timeout=TIMEOUT_S,
                                               include_authorized_operations=True)[group].result(timeout=TIMEOUT_S)
    assert set(described.authorized_operations) == {AclOperation.DESCRIBE}


def test_transactional_and_idempotent_producers_need_their_rights(broker, pki):
    txn_id = unique("acl-txn")
    prod = Producer({**conf_for(broker, pki, "carol"), "transactional.id": txn_id},
                    logger=client_logger("producer"))
    with pytest.raises(KafkaException) as raised:
        prod.init_transactions(TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # No IDEMPOTENT_WRITE and no WRITE on any topic: the idempotent producer is refused
    # (DESCRIBE on its topic, so that metadata does not fail first).
    topic = create_topic(broker.bootstrap, unique("acl-idem"))
    add_acls(broker, allow(ResourceType.TOPIC, topic, "User:carol", AclOperation.DESCRIBE))
    seen = []
    idem = Producer({**conf_for(broker, pki, "carol"), "enable.idempotence": True,
                     "message.timeout.ms": 10000, "error_cb": lambda e: seen.append(str(e))},
                    logger=client_logger("producer"))
    try:
        idem.produce(topic, b"x", on_delivery=lambda err, _m: seen.append(str(err)))
        idem.flush(15)
    except Exception as e:  # librdkafka's fatal error surfaces through the callback
        seen.extend([str(e), str(e.__cause__), str(e.__context__)])
    assert any("Cluster authorization failed" in text for text in seen), seen


def test_describe_cluster_authorized_operations(broker, pki):
    admin = super_admin(broker)
    ops = admin.describe_cluster(include_authorized_operations=True,
                                 request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert len(ops.authorized_operations) == 7
    carol = AdminClient(conf_for(broker, pki, "carol"), logger=client_logger("admin"))
    ops = carol.describe_cluster(include_authorized_operations=True,
                                 request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert not ops.authorized_operations


def test_acl_apis_answer_security_disabled_without_an_authorizer(tmp_path_factory):
    plain = Broker(tmp_path_factory.mktemp("no-authorizer"))
    plain.start()
    try:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap}, logger=client_logger("admin"))
        binding = allow(ResourceType.TOPIC, "t", "User:x", AclOperation.READ)
        expect_code(admin.create_acls([binding], request_timeout=TIMEOUT_S)[binding],
                    KafkaError.SECURITY_DISABLED)
    finally:
        plain.cleanup()
        shutil.rmtree(plain.data_dir, ignore_errors=True)


def test_tidelog_acl_cli_adds_lists_and_removes(broker, pki):
    from broker_process import tidelog_bin
    topic = create_topic(broker.bootstrap, unique("acl-cli"))

    def cli(*args):
        done = subprocess.run([str(tidelog_bin()), "acl", *args, "--bootstrap", broker.bootstrap],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def bob_produces():
        outcome = {}
        prod = Producer({**conf_for(broker, pki, "bob"), "message.timeout.ms": 10000},
                        logger=client_logger("producer"))
        prod.produce(topic, b"x", on_delivery=lambda err, _m: outcome.setdefault("err", err))
        assert prod.flush(TIMEOUT_S) == 0
        return outcome["err"]

    out = cli("add", "--allow-principal", "User:bob", "--operation", "Write", "--operation", "Describe",
              "--topic", topic)
    assert out.count("added ALLOW User:bob") == 2, out
    assert bob_produces() is None
    listed = cli("list", "--topic", topic)
    assert f"ALLOW User:bob WRITE on TOPIC:LITERAL:{topic} from *" in listed, listed
    assert "DESCRIBE" in listed
    removed = cli("remove", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    assert "removed ALLOW User:bob WRITE" in removed, removed
    err = bob_produces()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "WRITE" not in cli("list", "--topic", topic)


def test_scram_credential_admin_needs_cluster_rights(broker, pki):
    """AlterUserScramCredentials needs ALTER on the cluster and DescribeUserScram-
    Credentials DESCRIBE, as in Kafka: a principal without them is refused and no
    credential is written; the super user may do both."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    name = unique("scram-user")
    upsert = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"secret", b"salt-1234")
    alice = AdminClient(conf_for(broker, pki, "alice"), logger=client_logger("admin"))
    with pytest.raises(KafkaException) as raised:
        alice.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT_S)[name].result(timeout=TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The describe through tidelog's CLI as alice (mutual TLS): librdkafka 2.x aborts
    # the process on a refused DescribeUserScramCredentials.
    from broker_process import tidelog_bin
    props = pki / "alice-cli.properties"
    props.write_text(f"security.protocol=SSL\nssl.ca.location={pki / 'ca.pem'}\n"
                     f"ssl.certificate.location={pki / 'alice.pem'}\nssl.key.location={pki / 'alice.key'}\n")
    listed = subprocess.run([str(tidelog_bin()), "user", "list", "--bootstrap", f"127.0.0.1:{broker.ssl_port}",
                             "--command-config", str(props)], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in listed.stderr, listed

    admin = super_admin(broker)
    described = admin.describe_user_scram_credentials(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert name not in described, "the refused upsertion wrote a credential"
    admin.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT_S)[name].result(timeout=TIMEOUT_S)
    described = admin.describe_user_scram_credentials([name], request_timeout=TIMEOUT_S)
    infos = described[name].result(timeout=TIMEOUT_S).scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
