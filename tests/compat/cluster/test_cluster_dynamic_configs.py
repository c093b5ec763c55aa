"""Dynamic broker configs on a cluster: the cluster-wide default, set through a
broker-only node (which forwards it to the controller quorum), reaches every node,
voters and broker-only alike (each broker describes its own configs: the AdminClient
asks broker N about BROKER "N"); one broker's own config stays its own."""

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from cluster_meta import create_topic
from compat_helpers import admin, unique, wait_until
from config_wire import wire_alter


def alter(client, name, config, value):
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, name,
                              incremental_configs=[ConfigEntry(config, value, incremental_operation=op)])
    client.incremental_alter_configs([resource], request_timeout=20)[resource].result(timeout=30)


def alter_default(cluster, node_id, config, value):
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    wire_alter(cluster.node(node_id).bootstrap, "", [(config, value, op)])


def broker_entry(client, node_id, config):
    resource = ConfigResource(ResourceType.BROKER, str(node_id))
    configs = client.describe_configs([resource], request_timeout=20)[resource].result(timeout=30)
    entry = configs[config]
    return entry.value, entry.source


def test_a_cluster_default_reaches_every_node_and_a_broker_config_only_its_broker(cluster_factory):
    cluster = cluster_factory(size=4, voters=3)
    client = admin(cluster.bootstrap)
    topic = create_topic(cluster, unique("dyn-cluster"), partitions=4, replication_factor=3)
    alter_default(cluster, 4, "log.retention.ms", "90000")
    default = ("90000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    for node_id in cluster.nodes:
        wait_until(lambda: broker_entry(client, node_id, "log.retention.ms") == default, 15,
                   f"node {node_id} to apply the cluster default")
    alter(client, "4", "log.retention.ms", "45000")
    assert broker_entry(client, 4, "log.retention.ms") == ("45000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    for node_id in (1, 2, 3):
        assert broker_entry(client, node_id, "log.retention.ms") == default
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entry = client.describe_configs([resource], request_timeout=20)[resource].result(timeout=30)["retention.ms"]
    assert entry.value in ("90000", "45000"), entry
    alter_default(cluster, 2, "log.retention.ms", None)
    for node_id in (1, 2, 3):
        wait_until(lambda: broker_entry(client, node_id, "log.retention.ms")[1] == ConfigSource.DEFAULT_CONFIG.value,
                   15, f"node {node_id} to drop the cluster default")
    assert broker_entry(client, 4, "log.retention.ms")[0] == "45000"
