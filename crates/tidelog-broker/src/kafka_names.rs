//! Every broker setting name of Apache Kafka 4.x that is not one of tidelog's own
//! settings (`crate::settings`), and what a start-up does when a file, the environment
//! or `--set` gives it: so a stock Kafka `server.properties` starts tidelog, a setting
//! that would change what Kafka does but cannot here stops start-up with the reason, and
//! a name that is not Kafka's is still an error. docs/configuration.md lists the same
//! table; a test keeps the two equal.

/// What tidelog does with one Kafka broker setting it does not have as its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Read by `tidelog serve` as one of its own flags (node id, data dir, quorum).
    Process,
    /// Another unit of a tidelog setting (Kafka's `log.retention.hours` for
    /// `log.retention.ms`): the value times `unit_ms`. Of several synonyms the one of
    /// lowest `rank` wins, the setting itself (rank 0) over all, as in Kafka.
    Synonym {
        of: &'static str,
        unit_ms: i64,
        rank: u8,
    },
    /// Accepted with one start-up warning: it has no effect here, for `.0`.
    Ignored(&'static str),
    /// Start-up stops unless the value is one of `off` (the value that means the feature
    /// is not used): tidelog cannot do what it asks, for `why`.
    Refused {
        off: &'static [&'static str],
        why: &'static str,
    },
}

use Treatment::{Ignored, Process, Refused, Synonym};

const THREADS: &str = "tidelog sizes its thread pools to the machine's cores";
const SOCKETS: &str = "sockets use the kernel's buffer sizes and backlog";
const PURGATORY: &str = "tidelog's delayed requests are not kept in a purgatory to purge";
const METRICS: &str =
    "tidelog's metrics are served in Prometheus form on the admin port's /metrics";
const QUOTAS: &str =
    "replication, alter-log-dirs and controller mutation quotas are not enforced (client produce, fetch and request quotas are)";
const TIERED_TUNING: &str =
    "tiered storage is not built (remote.log.storage.system.enable=true is refused)";
const TIERED: &str = "tiered storage is not built";
const SECURITY: &str =
    "applies to GSSAPI (Kerberos), which tidelog does not serve, or to a broker's own OAUTHBEARER login (brokers log in to each other with PLAIN or SCRAM; OAUTHBEARER clients are served)";
const TLS_TUNING: &str =
    "TLS is rustls with its own safe defaults (ciphers, key managers, random source)";
const LISTENER_START: &str =
    "every listener starts once the node has its metadata (a single node) or has joined";
const DELEGATION_TOKENS: &str = "delegation tokens are not supported";
const PASSWORD_ENCODER: &str = "tidelog stores no encoded passwords";
const CONSUMER_PROTOCOL: &str =
    "a KIP-848 consumer-group setting tidelog does not follow yet (it has the group.consumer session timeout and heartbeat interval with their bounds, assignors and max size)";
const SHARE_GROUPS: &str = "applies to a part of KIP-932 share groups tidelog does not have yet";
const STREAMS_GROUPS: &str = "applies to KIP-1071 streams groups, which tidelog does not serve";
const METADATA_DIR: &str = "the metadata log is kept in the node's data directory";
const TUNING: &str = "a Kafka tuning knob with no counterpart in tidelog's design";
const ZOOKEEPER: &str =
    "ZooKeeper mode was removed in Kafka 4.0; tidelog, like Kafka 4, runs its own Raft quorum";
const REMOVED_IN_4: &str = "removed in Kafka 4.0";
const PLUGIN: &str = "tidelog cannot load Java plug-in classes";
const CLEANER_ALWAYS_ON: &str = "compacted topics are always cleaned";
const NOT_BUILT: &str = "the feature it enables is not built";

/// Sorted by name.
pub static KAFKA_BROKER_NAMES: &[(&str, Treatment)] = &[
    (
        "add.partitions.to.txn.retry.backoff.max.ms",
        Ignored(TUNING),
    ),
    ("add.partitions.to.txn.retry.backoff.ms", Ignored(TUNING)),
    (
        "alter.config.policy.class.name",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    (
        "alter.log.dirs.replication.quota.window.num",
        Ignored(QUOTAS),
    ),
    (
        "alter.log.dirs.replication.quota.window.size.seconds",
        Ignored(QUOTAS),
    ),
    ("broker.id", Process),
    (
        "broker.id.generation.enable",
        Refused {
            off: &[],
            why: REMOVED_IN_4,
        },
    ),
    (
        "client.quota.callback.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("connections.max.idle.ms", Ignored(TUNING)),
    (
        "control.plane.listener.name",
        Refused {
            off: &[],
            why: REMOVED_IN_4,
        },
    ),
    ("controlled.shutdown.max.retries", Ignored(TUNING)),
    ("controlled.shutdown.retry.backoff.ms", Ignored(TUNING)),
    ("controller.listener.names", Process),
    (
        "controller.performance.always.log.threshold.ms",
        Ignored(TUNING),
    ),
    ("controller.performance.sample.period.ms", Ignored(TUNING)),
    ("controller.quorum.append.linger.ms", Ignored(TUNING)),
    ("controller.quorum.auto.join.enable", Ignored(TUNING)),
    ("controller.quorum.bootstrap.servers", Process),
    ("controller.quorum.election.backoff.max.ms", Ignored(TUNING)),
    ("controller.quorum.election.timeout.ms", Ignored(TUNING)),
    ("controller.quorum.fetch.timeout.ms", Ignored(TUNING)),
    ("controller.quorum.retry.backoff.ms", Ignored(TUNING)),
    ("controller.quorum.voters", Process),
    ("controller.quota.window.num", Ignored(QUOTAS)),
    ("controller.quota.window.size.seconds", Ignored(QUOTAS)),
    ("controller.socket.timeout.ms", Ignored(TUNING)),
    (
        "create.topic.policy.class.name",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    (
        "delegation.token.expiry.check.interval.ms",
        Ignored(DELEGATION_TOKENS),
    ),
    (
        "delegation.token.expiry.time.ms",
        Ignored(DELEGATION_TOKENS),
    ),
    (
        "delegation.token.max.lifetime.ms",
        Ignored(DELEGATION_TOKENS),
    ),
    ("delegation.token.secret.key", Ignored(DELEGATION_TOKENS)),
    (
        "delete.records.purgatory.purge.interval.requests",
        Ignored(PURGATORY),
    ),
    ("early.start.listeners", Ignored(LISTENER_START)),
    (
        "eligible.leader.replicas.enable",
        Refused {
            off: &["false"],
            why: NOT_BUILT,
        },
    ),
    ("fetch.max.bytes", Ignored(TUNING)),
    (
        "fetch.purgatory.purge.interval.requests",
        Ignored(PURGATORY),
    ),
    (
        "group.consumer.regex.refresh.interval.ms",
        Ignored(CONSUMER_PROTOCOL),
    ),
    ("group.coordinator.append.linger.ms", Ignored(TUNING)),
    ("group.coordinator.new.enable", Ignored(CONSUMER_PROTOCOL)),
    (
        "group.coordinator.rebalance.protocols",
        Ignored(CONSUMER_PROTOCOL),
    ),
    ("group.coordinator.threads", Ignored(THREADS)),
    ("group.share.assignors", Ignored(SHARE_GROUPS)),
    ("group.share.enable", Ignored(SHARE_GROUPS)),
    ("group.share.max.groups", Ignored(SHARE_GROUPS)),
    (
        "group.share.persister.class.name",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    (
        "group.streams.heartbeat.interval.ms",
        Ignored(STREAMS_GROUPS),
    ),
    (
        "group.streams.max.heartbeat.interval.ms",
        Ignored(STREAMS_GROUPS),
    ),
    (
        "group.streams.max.session.timeout.ms",
        Ignored(STREAMS_GROUPS),
    ),
    ("group.streams.max.size", Ignored(STREAMS_GROUPS)),
    (
        "group.streams.max.standby.replicas",
        Ignored(STREAMS_GROUPS),
    ),
    (
        "group.streams.min.heartbeat.interval.ms",
        Ignored(STREAMS_GROUPS),
    ),
    (
        "group.streams.min.session.timeout.ms",
        Ignored(STREAMS_GROUPS),
    ),
    (
        "group.streams.num.standby.replicas",
        Ignored(STREAMS_GROUPS),
    ),
    ("group.streams.session.timeout.ms", Ignored(STREAMS_GROUPS)),
    ("initial.broker.registration.timeout.ms", Ignored(TUNING)),
    (
        "inter.broker.protocol.version",
        Refused {
            off: &[],
            why: REMOVED_IN_4,
        },
    ),
    ("internal.metadata.max.batch.size.in.bytes", Ignored(TUNING)),
    ("kafka.metrics.polling.interval.secs", Ignored(METRICS)),
    ("kafka.metrics.reporters", Ignored(METRICS)),
    ("leader.replication.throttled.rate", Ignored(QUOTAS)),
    ("log.cleaner.dedupe.buffer.size", Ignored(TUNING)),
    (
        "log.cleaner.enable",
        Refused {
            off: &["true"],
            why: CLEANER_ALWAYS_ON,
        },
    ),
    ("log.cleaner.io.buffer.load.factor", Ignored(TUNING)),
    ("log.cleaner.io.buffer.size", Ignored(TUNING)),
    ("log.cleaner.io.max.bytes.per.second", Ignored(TUNING)),
    ("log.cleaner.threads", Ignored(THREADS)),
    ("log.dir", Process),
    ("log.dir.failure.timeout.ms", Ignored(TUNING)),
    ("log.dirs", Process),
    ("log.flush.offset.checkpoint.interval.ms", Ignored(TUNING)),
    (
        "log.flush.start.offset.checkpoint.interval.ms",
        Ignored(TUNING),
    ),
    ("log.initial.task.delay.ms", Ignored(TUNING)),
    ("log.local.retention.bytes", Ignored(TIERED_TUNING)),
    ("log.local.retention.ms", Ignored(TIERED_TUNING)),
    (
        "log.retention.hours",
        Synonym {
            of: "log.retention.ms",
            unit_ms: 3600000,
            rank: 2,
        },
    ),
    (
        "log.retention.minutes",
        Synonym {
            of: "log.retention.ms",
            unit_ms: 60000,
            rank: 1,
        },
    ),
    (
        "log.roll.hours",
        Synonym {
            of: "log.roll.ms",
            unit_ms: 3600000,
            rank: 1,
        },
    ),
    (
        "log.roll.jitter.hours",
        Synonym {
            of: "log.roll.jitter.ms",
            unit_ms: 3600000,
            rank: 1,
        },
    ),
    ("max.connection.creation.rate", Ignored(TUNING)),
    ("max.connections.per.ip", Ignored(TUNING)),
    ("max.connections.per.ip.overrides", Ignored(TUNING)),
    ("max.incremental.fetch.session.cache.slots", Ignored(TUNING)),
    ("max.request.partition.size.limit", Ignored(TUNING)),
    ("metadata.log.dir", Ignored(METADATA_DIR)),
    (
        "metadata.log.max.record.bytes.between.snapshots",
        Ignored(TUNING),
    ),
    ("metadata.log.max.snapshot.interval.ms", Ignored(TUNING)),
    ("metadata.log.segment.bytes", Ignored(TUNING)),
    ("metadata.log.segment.ms", Ignored(TUNING)),
    ("metadata.max.idle.interval.ms", Ignored(TUNING)),
    ("metadata.max.retention.bytes", Ignored(TUNING)),
    ("metadata.max.retention.ms", Ignored(TUNING)),
    ("metric.reporters", Ignored(METRICS)),
    ("metrics.num.samples", Ignored(METRICS)),
    ("metrics.recording.level", Ignored(METRICS)),
    ("metrics.sample.window.ms", Ignored(METRICS)),
    ("node.id", Process),
    ("num.io.threads", Ignored(THREADS)),
    ("num.network.threads", Ignored(THREADS)),
    ("num.recovery.threads.per.data.dir", Ignored(THREADS)),
    ("num.replica.alter.log.dirs.threads", Ignored(THREADS)),
    ("num.replica.fetchers", Ignored(THREADS)),
    ("offsets.load.buffer.size", Ignored(TUNING)),
    ("offsets.topic.compression.codec", Ignored(TUNING)),
    (
        "password.encoder.cipher.algorithm",
        Ignored(PASSWORD_ENCODER),
    ),
    ("password.encoder.iterations", Ignored(PASSWORD_ENCODER)),
    ("password.encoder.key.length", Ignored(PASSWORD_ENCODER)),
    (
        "password.encoder.keyfactory.algorithm",
        Ignored(PASSWORD_ENCODER),
    ),
    ("password.encoder.old.secret", Ignored(PASSWORD_ENCODER)),
    ("password.encoder.secret", Ignored(PASSWORD_ENCODER)),
    (
        "principal.builder.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("process.roles", Process),
    (
        "producer.purgatory.purge.interval.requests",
        Ignored(PURGATORY),
    ),
    ("queued.max.request.bytes", Ignored(TUNING)),
    ("remote.fetch.max.wait.ms", Ignored(TIERED_TUNING)),
    (
        "remote.list.offsets.request.timeout.ms",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.index.file.cache.total.size.bytes",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.copier.thread.pool.size",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.copy.max.bytes.per.second",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.copy.quota.window.num",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.copy.quota.window.size.seconds",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.expiration.thread.pool.size",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.fetch.max.bytes.per.second",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.fetch.quota.window.num",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.fetch.quota.window.size.seconds",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.follower.thread.pool.size",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.task.interval.ms",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.manager.thread.pool.size",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.metadata.custom.metadata.max.bytes",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.metadata.manager.class.name",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.metadata.manager.class.path",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.metadata.manager.impl.prefix",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.metadata.manager.listener.name",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.reader.max.pending.tasks",
        Ignored(TIERED_TUNING),
    ),
    ("remote.log.reader.threads", Ignored(TIERED_TUNING)),
    (
        "remote.log.storage.manager.class.name",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.storage.manager.class.path",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.storage.manager.impl.prefix",
        Ignored(TIERED_TUNING),
    ),
    (
        "remote.log.storage.system.enable",
        Refused {
            off: &["false"],
            why: TIERED,
        },
    ),
    (
        "replica.alter.log.dirs.io.max.bytes.per.second",
        Ignored(QUOTAS),
    ),
    ("replica.fetch.min.bytes", Ignored(TUNING)),
    ("replica.selector.class", Ignored(TUNING)),
    ("replica.socket.receive.buffer.bytes", Ignored(SOCKETS)),
    ("replica.socket.timeout.ms", Ignored(TUNING)),
    ("replication.quota.window.num", Ignored(QUOTAS)),
    ("replication.quota.window.size.seconds", Ignored(QUOTAS)),
    ("request.timeout.ms", Ignored(TUNING)),
    (
        "reserved.broker.max.id",
        Refused {
            off: &[],
            why: REMOVED_IN_4,
        },
    ),
    (
        "sasl.client.callback.handler.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("sasl.kerberos.kinit.cmd", Ignored(SECURITY)),
    ("sasl.kerberos.min.time.before.relogin", Ignored(SECURITY)),
    ("sasl.kerberos.principal.to.local.rules", Ignored(SECURITY)),
    ("sasl.kerberos.service.name", Ignored(SECURITY)),
    ("sasl.kerberos.ticket.renew.jitter", Ignored(SECURITY)),
    (
        "sasl.kerberos.ticket.renew.window.factor",
        Ignored(SECURITY),
    ),
    (
        "sasl.login.callback.handler.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    (
        "sasl.login.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("sasl.login.connect.timeout.ms", Ignored(SECURITY)),
    ("sasl.login.read.timeout.ms", Ignored(SECURITY)),
    ("sasl.login.refresh.buffer.seconds", Ignored(SECURITY)),
    ("sasl.login.refresh.min.period.seconds", Ignored(SECURITY)),
    ("sasl.login.refresh.window.factor", Ignored(SECURITY)),
    ("sasl.login.refresh.window.jitter", Ignored(SECURITY)),
    ("sasl.login.retry.backoff.max.ms", Ignored(SECURITY)),
    ("sasl.login.retry.backoff.ms", Ignored(SECURITY)),
    ("sasl.oauthbearer.token.endpoint.url", Ignored(SECURITY)),
    (
        "sasl.server.callback.handler.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    (
        "security.providers",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("server.max.startup.time.ms", Ignored(TUNING)),
    ("share.coordinator.append.linger.ms", Ignored(SHARE_GROUPS)),
    (
        "share.coordinator.cold.partition.snapshot.interval.ms",
        Ignored(SHARE_GROUPS),
    ),
    ("share.coordinator.load.buffer.size", Ignored(SHARE_GROUPS)),
    (
        "share.coordinator.snapshot.update.records.per.snapshot",
        Ignored(SHARE_GROUPS),
    ),
    (
        "share.coordinator.state.topic.compression.codec",
        Ignored(SHARE_GROUPS),
    ),
    (
        "share.coordinator.state.topic.min.isr",
        Ignored(SHARE_GROUPS),
    ),
    ("share.coordinator.threads", Ignored(THREADS)),
    ("share.coordinator.write.timeout.ms", Ignored(SHARE_GROUPS)),
    ("share.fetch.max.fetch.records", Ignored(SHARE_GROUPS)),
    (
        "share.fetch.purgatory.purge.interval.requests",
        Ignored(PURGATORY),
    ),
    ("socket.connection.setup.timeout.max.ms", Ignored(TUNING)),
    ("socket.connection.setup.timeout.ms", Ignored(TUNING)),
    ("socket.listen.backlog.size", Ignored(SOCKETS)),
    ("socket.receive.buffer.bytes", Ignored(SOCKETS)),
    ("socket.send.buffer.bytes", Ignored(SOCKETS)),
    ("ssl.allow.dn.changes", Ignored(TLS_TUNING)),
    ("ssl.allow.san.changes", Ignored(TLS_TUNING)),
    (
        "ssl.cipher.suites",
        Refused {
            off: &[""],
            why: "cipher suites are rustls's safe defaults and cannot be chosen",
        },
    ),
    (
        "ssl.engine.factory.class",
        Refused {
            off: &[""],
            why: PLUGIN,
        },
    ),
    ("ssl.keymanager.algorithm", Ignored(TLS_TUNING)),
    ("ssl.protocol", Ignored(TLS_TUNING)),
    ("ssl.provider", Ignored(TLS_TUNING)),
    ("ssl.secure.random.implementation", Ignored(TLS_TUNING)),
    ("ssl.trustmanager.algorithm", Ignored(TLS_TUNING)),
    ("ssl.truststore.password", Ignored(TLS_TUNING)),
    ("telemetry.max.bytes", Ignored(TUNING)),
    ("transaction.partition.verification.enable", Ignored(TUNING)),
    (
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Ignored(TUNING),
    ),
    ("transaction.state.log.load.buffer.size", Ignored(TUNING)),
    ("transaction.state.log.min.isr", Ignored(TUNING)),
    ("transaction.state.log.segment.bytes", Ignored(TUNING)),
    (
        "transaction.two.phase.commit.enable",
        Refused {
            off: &["false"],
            why: NOT_BUILT,
        },
    ),
    (
        "unstable.api.versions.enable",
        Refused {
            off: &["false"],
            why: NOT_BUILT,
        },
    ),
    (
        "unstable.feature.versions.enable",
        Refused {
            off: &["false"],
            why: NOT_BUILT,
        },
    ),
    (
        "zookeeper.clientCnxnSocket",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.connect",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.connection.timeout.ms",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.max.in.flight.requests",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.metadata.migration.enable",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.session.timeout.ms",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.set.acl",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.cipher.suites",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.client.enable",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.crl.enable",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.enabled.protocols",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.endpoint.identification.algorithm",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.keystore.location",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.keystore.password",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.keystore.type",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.ocsp.enable",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.protocol",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.truststore.location",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.truststore.password",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
    (
        "zookeeper.ssl.truststore.type",
        Refused {
            off: &[],
            why: ZOOKEEPER,
        },
    ),
];

/// What tidelog does with `name`, if it is one of Kafka's broker settings that tidelog
/// does not have as its own.
pub fn treatment(name: &str) -> Option<Treatment> {
    KAFKA_BROKER_NAMES
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .map(|i| KAFKA_BROKER_NAMES[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_disjoint_from_tidelogs_own_settings() {
        for pair in KAFKA_BROKER_NAMES.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
        for (name, _, _) in crate::settings::ALL {
            assert_eq!(treatment(name), None, "{name} is a tidelog setting");
        }
        for (name, t) in KAFKA_BROKER_NAMES {
            if let Synonym { of, .. } = t {
                assert!(
                    crate::settings::ALL.iter().any(|(n, _, _)| n == of),
                    "{name} is a synonym of unknown {of}"
                );
            }
        }
        assert_eq!(treatment("num.io.threads"), Some(Ignored(THREADS)));
        assert_eq!(treatment("node.id"), Some(Process));
        assert_eq!(treatment("log.retention.mss"), None);
    }
}
