//! Every broker setting tidelog understands, once: its Kafka name, its default as Kafka
//! writes it, and the type it is read as. Code reads a setting only through these
//! constants ([`crate::config::BrokerConfig::get`]), so a misspelt setting is a compile
//! error and a value is always read as the type it was validated as.

use std::marker::PhantomData;
use std::time::Duration;

/// What a setting's value must parse as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Bool,
    Text,
}

/// How a value of type `T` is read from its text (validated by [`Kind`] when set).
pub trait Value: Sized {
    const KIND: Kind;
    fn parse(text: &str) -> Option<Self>;
}

impl Value for i64 {
    const KIND: Kind = Kind::Int;
    fn parse(text: &str) -> Option<i64> {
        text.trim().parse().ok()
    }
}

impl Value for bool {
    const KIND: Kind = Kind::Bool;
    fn parse(text: &str) -> Option<bool> {
        text.trim().parse().ok()
    }
}

impl Value for String {
    const KIND: Kind = Kind::Text;
    fn parse(text: &str) -> Option<String> {
        Some(text.to_string())
    }
}

/// One broker setting, read as a `T`.
#[derive(Debug)]
pub struct Setting<T> {
    pub name: &'static str,
    pub default: &'static str,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Setting<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Setting<T> {}

impl<T: Value> Setting<T> {
    const fn new(name: &'static str, default: &'static str) -> Setting<T> {
        Setting {
            name,
            default,
            kind: PhantomData,
        }
    }

    /// The default, as the type (the table's defaults are tested to parse).
    pub fn default_value(&self) -> Option<T> {
        T::parse(self.default)
    }
}

impl Setting<i64> {
    /// A milliseconds setting as a duration (negative reads as zero).
    pub fn as_duration(value: i64) -> Duration {
        Duration::from_millis(u64::try_from(value).unwrap_or(0))
    }
}

macro_rules! settings {
    ($( $(#[$doc:meta])* $ident:ident : $ty:ty = $name:literal, $default:literal; )*) => {
        $( $(#[$doc])* pub const $ident: Setting<$ty> = Setting::new($name, $default); )*

        /// Every setting: name, default, kind.
        pub(crate) const ALL: &[(&str, &str, Kind)] =
            &[ $( ($name, $default, <$ty as Value>::KIND) ),* ];
    };
}

settings! {
    NUM_PARTITIONS: i64 = "num.partitions", "1";
    DEFAULT_REPLICATION_FACTOR: i64 = "default.replication.factor", "1";
    AUTO_CREATE_TOPICS_ENABLE: bool = "auto.create.topics.enable", "true";
    DELETE_TOPIC_ENABLE: bool = "delete.topic.enable", "true";
    LOG_RETENTION_MS: i64 = "log.retention.ms", "604800000";
    LOG_RETENTION_BYTES: i64 = "log.retention.bytes", "-1";
    LOG_RETENTION_CHECK_INTERVAL_MS: i64 = "log.retention.check.interval.ms", "300000";
    LOG_SEGMENT_BYTES: i64 = "log.segment.bytes", "1073741824";
    LOG_ROLL_MS: i64 = "log.roll.ms", "604800000";
    LOG_INDEX_SIZE_MAX_BYTES: i64 = "log.index.size.max.bytes", "10485760";
    LOG_INDEX_INTERVAL_BYTES: i64 = "log.index.interval.bytes", "4096";
    LOG_FLUSH_INTERVAL_MESSAGES: i64 = "log.flush.interval.messages", "9223372036854775807";
    LOG_FLUSH_INTERVAL_MS: i64 = "log.flush.interval.ms", "9223372036854775807";
    LOG_FLUSH_SCHEDULER_INTERVAL_MS: i64 = "log.flush.scheduler.interval.ms", "1000";
    LOG_SEGMENT_DELETE_DELAY_MS: i64 = "log.segment.delete.delay.ms", "60000";
    /// Threads of the background log flusher (the fsyncs of rolled segments, flush.ms,
    /// checkpoints), as Kafka's background threads run its scheduled flushes.
    BACKGROUND_THREADS: i64 = "background.threads", "10";
    /// Segment `.log` files kept open at most, process-wide, active segments' included:
    /// the least recently used are closed and opened again when next appended to, read
    /// or fsynced. 0 (the default): half of the process's open-file limit, at least
    /// 1,024. Not a Kafka setting.
    LOG_MAX_OPEN_FILES: i64 = "log.max.open.files", "0";
    LOG_CLEANUP_POLICY: String = "log.cleanup.policy", "delete";
    LOG_CLEANER_BACKOFF_MS: i64 = "log.cleaner.backoff.ms", "15000";
    LOG_CLEANER_DELETE_RETENTION_MS: i64 = "log.cleaner.delete.retention.ms", "86400000";
    LOG_CLEANER_MIN_COMPACTION_LAG_MS: i64 = "log.cleaner.min.compaction.lag.ms", "0";
    LOG_MESSAGE_TIMESTAMP_TYPE: String = "log.message.timestamp.type", "CreateTime";
    // The broker defaults of Kafka 4's topic configs of the same meaning.
    LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS: i64 = "log.message.timestamp.before.max.ms", "9223372036854775807";
    LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS: i64 = "log.message.timestamp.after.max.ms", "3600000";
    LOG_CLEANER_MAX_COMPACTION_LAG_MS: i64 = "log.cleaner.max.compaction.lag.ms", "9223372036854775807";
    LOG_CLEANER_MIN_CLEANABLE_RATIO: String = "log.cleaner.min.cleanable.ratio", "0.5";
    LOG_ROLL_JITTER_MS: i64 = "log.roll.jitter.ms", "0";
    LOG_PREALLOCATE: bool = "log.preallocate", "false";
    // Kept as every topic's default and reported by DescribeConfigs; batches are
    // stored as the producer compressed them (no recompression).
    COMPRESSION_TYPE: String = "compression.type", "producer";
    COMPRESSION_GZIP_LEVEL: i64 = "compression.gzip.level", "-1";
    COMPRESSION_LZ4_LEVEL: i64 = "compression.lz4.level", "9";
    COMPRESSION_ZSTD_LEVEL: i64 = "compression.zstd.level", "3";
    MESSAGE_MAX_BYTES: i64 = "message.max.bytes", "1048588";
    MIN_INSYNC_REPLICAS: i64 = "min.insync.replicas", "1";
    UNCLEAN_LEADER_ELECTION_ENABLE: bool = "unclean.leader.election.enable", "false";
    SOCKET_REQUEST_MAX_BYTES: i64 = "socket.request.max.bytes", "104857600";
    QUEUED_MAX_REQUESTS: i64 = "queued.max.requests", "500";
    MAX_CONNECTIONS: i64 = "max.connections", "10000";
    OFFSETS_TOPIC_NUM_PARTITIONS: i64 = "offsets.topic.num.partitions", "50";
    OFFSETS_TOPIC_REPLICATION_FACTOR: i64 = "offsets.topic.replication.factor", "3";
    PRODUCER_ID_EXPIRATION_MS: i64 = "producer.id.expiration.ms", "86400000";
    TRANSACTION_STATE_LOG_NUM_PARTITIONS: i64 = "transaction.state.log.num.partitions", "50";
    TRANSACTION_MAX_TIMEOUT_MS: i64 = "transaction.max.timeout.ms", "900000";
    TRANSACTIONAL_ID_EXPIRATION_MS: i64 = "transactional.id.expiration.ms", "604800000";
    TRANSACTION_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS: i64 =
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000";
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR: i64 =
        "transaction.state.log.replication.factor", "3";
    GROUP_INITIAL_REBALANCE_DELAY_MS: i64 = "group.initial.rebalance.delay.ms", "3000";
    GROUP_MIN_SESSION_TIMEOUT_MS: i64 = "group.min.session.timeout.ms", "6000";
    GROUP_MAX_SESSION_TIMEOUT_MS: i64 = "group.max.session.timeout.ms", "1800000";
    GROUP_MAX_SIZE: i64 = "group.max.size", "2147483647";
    // KIP-848 consumer groups (crate::group::consumer).
    GROUP_CONSUMER_SESSION_TIMEOUT_MS: i64 = "group.consumer.session.timeout.ms", "45000";
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS: i64 = "group.consumer.heartbeat.interval.ms", "5000";
    // The bounds of the group configs consumer.session.timeout.ms and
    // consumer.heartbeat.interval.ms (crate::group_config), and of the two above.
    GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS: i64 = "group.consumer.min.session.timeout.ms", "45000";
    GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS: i64 = "group.consumer.max.session.timeout.ms", "60000";
    GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS: i64 =
        "group.consumer.min.heartbeat.interval.ms", "5000";
    GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS: i64 =
        "group.consumer.max.heartbeat.interval.ms", "15000";
    GROUP_CONSUMER_ASSIGNORS: String = "group.consumer.assignors", "uniform,range";
    GROUP_CONSUMER_MAX_SIZE: i64 = "group.consumer.max.size", "2147483647";
    // KIP-848's online migration: whether a classic group with members becomes a consumer
    // group when a consumer-protocol member joins it (upgrade), and a consumer group of
    // classic members a classic group when its last consumer-protocol member goes
    // (downgrade): disabled, downgrade, upgrade, bidirectional.
    GROUP_CONSUMER_MIGRATION_POLICY: String = "group.consumer.migration.policy", "bidirectional";
    // KIP-932 share groups (crate::share, crate::group::share).
    GROUP_SHARE_SESSION_TIMEOUT_MS: i64 = "group.share.session.timeout.ms", "45000";
    GROUP_SHARE_HEARTBEAT_INTERVAL_MS: i64 = "group.share.heartbeat.interval.ms", "5000";
    GROUP_SHARE_MAX_SIZE: i64 = "group.share.max.size", "200";
    GROUP_SHARE_RECORD_LOCK_DURATION_MS: i64 = "group.share.record.lock.duration.ms", "30000";
    GROUP_SHARE_DELIVERY_COUNT_LIMIT: i64 = "group.share.delivery.count.limit", "5";
    GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS: i64 = "group.share.partition.max.record.locks", "2000";
    GROUP_SHARE_MAX_SHARE_SESSIONS: i64 = "group.share.max.share.sessions", "2000";
    // KIP-1191 dead-letter topics of share groups: whether a missing one is created,
    // and the prefix a dead-letter topic's name must have ("" for none).
    ERRORS_DEADLETTERQUEUE_AUTO_CREATE_TOPICS_ENABLE: bool =
        "errors.deadletterqueue.auto.create.topics.enable", "false";
    ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX: String =
        "errors.deadletterqueue.topic.name.prefix", "dlq.";
    // The bounds a share group's own configs are held to (Kafka's ShareGroupConfig).
    GROUP_SHARE_MIN_SESSION_TIMEOUT_MS: i64 = "group.share.min.session.timeout.ms", "45000";
    GROUP_SHARE_MAX_SESSION_TIMEOUT_MS: i64 = "group.share.max.session.timeout.ms", "60000";
    GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS: i64 =
        "group.share.min.heartbeat.interval.ms", "5000";
    GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS: i64 =
        "group.share.max.heartbeat.interval.ms", "15000";
    GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS: i64 =
        "group.share.min.record.lock.duration.ms", "15000";
    GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS: i64 =
        "group.share.max.record.lock.duration.ms", "60000";
    GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT: i64 = "group.share.min.delivery.count.limit", "2";
    GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT: i64 = "group.share.max.delivery.count.limit", "10";
    GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS: i64 =
        "group.share.min.partition.max.record.locks", "100";
    GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS: i64 =
        "group.share.max.partition.max.record.locks", "10000";
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS: i64 =
        "share.coordinator.state.topic.num.partitions", "50";
    SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: i64 =
        "share.coordinator.state.topic.replication.factor", "3";
    SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES: i64 =
        "share.coordinator.state.topic.segment.bytes", "104857600";
    OFFSETS_RETENTION_MINUTES: i64 = "offsets.retention.minutes", "10080";
    BROKER_RACK: String = "broker.rack", "";
    ADVERTISED_HOST: String = "advertised.host", "";
    ADVERTISED_LISTENERS: String = "advertised.listeners", "";
    // Listeners and TLS (crate::listeners, crate::tls). Each ssl.* setting may also be
    // given for one listener as listener.name.<name>.ssl.*.
    LISTENERS: String = "listeners", "";
    LISTENER_SECURITY_PROTOCOL_MAP: String = "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
    INTER_BROKER_LISTENER_NAME: String = "inter.broker.listener.name", "";
    /// The inter-broker listener named by its protocol instead (Kafka's older form;
    /// only one of the two may be set).
    SECURITY_INTER_BROKER_PROTOCOL: String = "security.inter.broker.protocol", "";
    /// Only PEM is read (Kafka's default, JKS, is refused with a reason).
    SSL_KEYSTORE_TYPE: String = "ssl.keystore.type", "PEM";
    SSL_KEYSTORE_LOCATION: String = "ssl.keystore.location", "";
    SSL_KEYSTORE_CERTIFICATE_CHAIN: String = "ssl.keystore.certificate.chain", "";
    SSL_KEYSTORE_KEY: String = "ssl.keystore.key", "";
    SSL_KEY_PASSWORD: String = "ssl.key.password", "";
    SSL_KEYSTORE_PASSWORD: String = "ssl.keystore.password", "";
    SSL_TRUSTSTORE_TYPE: String = "ssl.truststore.type", "PEM";
    SSL_TRUSTSTORE_LOCATION: String = "ssl.truststore.location", "";
    SSL_TRUSTSTORE_CERTIFICATES: String = "ssl.truststore.certificates", "";
    SSL_CLIENT_AUTH: String = "ssl.client.auth", "none";
    SSL_ENABLED_PROTOCOLS: String = "ssl.enabled.protocols", "TLSv1.2,TLSv1.3";
    SSL_PRINCIPAL_MAPPING_RULES: String = "ssl.principal.mapping.rules", "DEFAULT";
    /// `https`: a broker connecting to another over TLS checks the certificate names
    /// the host it connects to; empty: it checks only the chain.
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: String = "ssl.endpoint.identification.algorithm",
        "https";
    // SASL (crate::sasl). The mechanisms, the re-authentication lifetime and each
    // mechanism's JAAS config may be given for one listener as listener.name.<name>.*.
    /// Kafka's default is GSSAPI, which tidelog does not serve: a SASL listener must
    /// name PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and/or OAUTHBEARER.
    SASL_ENABLED_MECHANISMS: String = "sasl.enabled.mechanisms", "GSSAPI";
    SASL_SERVER_MAX_RECEIVE_SIZE: i64 = "sasl.server.max.receive.size", "524288";
    CONNECTION_FAILED_AUTHENTICATION_DELAY_MS: i64 =
        "connection.failed.authentication.delay.ms", "100";
    CONNECTIONS_MAX_REAUTH_MS: i64 = "connections.max.reauth.ms", "0";
    /// How a broker authenticates to another's SASL inter-broker listener: PLAIN or
    /// SCRAM-SHA-256/512, with `username` and `password` from that listener's JAAS
    /// config for the mechanism (Kafka's default, GSSAPI, is not served).
    SASL_MECHANISM_INTER_BROKER_PROTOCOL: String = "sasl.mechanism.inter.broker.protocol",
        "GSSAPI";
    /// How a node authenticates to the controller listener when it is SASL_PLAINTEXT
    /// or SASL_SSL: PLAIN, with `username` and `password` from the controller
    /// listener's JAAS config (SCRAM credentials live in the metadata the quorum
    /// itself carries, so they cannot admit the quorum's own members).
    SASL_MECHANISM_CONTROLLER_PROTOCOL: String = "sasl.mechanism.controller.protocol",
        "GSSAPI";
    /// The JAAS config used where a listener has none of its own for a mechanism.
    SASL_JAAS_CONFIG: String = "sasl.jaas.config", "";
    // OAUTHBEARER (crate::sasl::oauth): the settings of Kafka's
    // OAuthBearerValidatorCallbackHandler (KIP-768); each may also be given for one
    // listener as listener.name.<name>.*.
    /// Where the keys that sign tokens are: `file:///path/jwks.json`, or an
    /// `http://` / `https://` URL answering a JWKS.
    SASL_OAUTHBEARER_JWKS_ENDPOINT_URL: String = "sasl.oauthbearer.jwks.endpoint.url", "";
    /// How often the key set is read again; a token whose `kid` is not in the set
    /// also reads it again (at most once per 10 s).
    SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS: i64 =
        "sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000";
    /// After a failed read of the key set, the first wait before the next; it doubles
    /// up to the max.
    SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS: i64 =
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "100";
    SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS: i64 =
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "10000";
    /// Comma-separated; a token's `aud` must name one of them. Empty: a token with
    /// an `aud` is refused (it is not meant for this broker).
    SASL_OAUTHBEARER_EXPECTED_AUDIENCE: String = "sasl.oauthbearer.expected.audience", "";
    /// A token's `iss` must be this; empty: not checked.
    SASL_OAUTHBEARER_EXPECTED_ISSUER: String = "sasl.oauthbearer.expected.issuer", "";
    /// The claim whose value is the principal's name (`User:<value>`).
    SASL_OAUTHBEARER_SUB_CLAIM_NAME: String = "sasl.oauthbearer.sub.claim.name", "sub";
    SASL_OAUTHBEARER_SCOPE_CLAIM_NAME: String = "sasl.oauthbearer.scope.claim.name", "scope";
    /// How far the token's times (`exp`, `nbf`) may be off this node's clock.
    SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS: i64 = "sasl.oauthbearer.clock.skew.seconds", "30";
    // Authorization (crate::auth): empty, or Kafka's StandardAuthorizer class name.
    AUTHORIZER_CLASS_NAME: String = "authorizer.class.name", "";
    /// Principals separated by semicolons (`User:admin;User:broker`).
    SUPER_USERS: String = "super.users", "";
    ALLOW_EVERYONE_IF_NO_ACL_FOUND: bool = "allow.everyone.if.no.acl.found", "false";
    // Client quotas (crate::quota): a rate is measured over quota.window.num samples
    // of quota.window.size.seconds each, as Kafka's ClientQuotaManager measures it.
    QUOTA_WINDOW_NUM: i64 = "quota.window.num", "11";
    QUOTA_WINDOW_SIZE_SECONDS: i64 = "quota.window.size.seconds", "1";
    OFFSETS_TOPIC_SEGMENT_BYTES: i64 = "offsets.topic.segment.bytes", "104857600";
    OFFSETS_RETENTION_CHECK_INTERVAL_MS: i64 = "offsets.retention.check.interval.ms", "600000";
    OFFSETS_COMMIT_TIMEOUT_MS: i64 = "offsets.commit.timeout.ms", "5000";
    OFFSET_METADATA_MAX_BYTES: i64 = "offset.metadata.max.bytes", "4096";
    // The cluster: replication, ISR and the controller quorum.
    REPLICA_LAG_TIME_MAX_MS: i64 = "replica.lag.time.max.ms", "30000";
    REPLICA_FETCH_MAX_BYTES: i64 = "replica.fetch.max.bytes", "1048576";
    REPLICA_FETCH_RESPONSE_MAX_BYTES: i64 = "replica.fetch.response.max.bytes", "10485760";
    REPLICA_FETCH_WAIT_MAX_MS: i64 = "replica.fetch.wait.max.ms", "500";
    REPLICA_FETCH_BACKOFF_MS: i64 = "replica.fetch.backoff.ms", "1000";
    REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS: i64 =
        "replica.high.watermark.checkpoint.interval.ms", "5000";
    FOLLOWER_REPLICATION_THROTTLED_RATE: i64 =
        "follower.replication.throttled.rate", "9223372036854775807";
    BROKER_SESSION_TIMEOUT_MS: i64 = "broker.session.timeout.ms", "9000";
    BROKER_HEARTBEAT_INTERVAL_MS: i64 = "broker.heartbeat.interval.ms", "2000";
    CONTROLLED_SHUTDOWN_ENABLE: bool = "controlled.shutdown.enable", "true";
    CONTROLLED_SHUTDOWN_MAX_WAIT_MS: i64 = "controlled.shutdown.max.wait.ms", "30000";
    AUTO_LEADER_REBALANCE_ENABLE: bool = "auto.leader.rebalance.enable", "true";
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS: i64 =
        "leader.imbalance.check.interval.seconds", "300";
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: i64 =
        "leader.imbalance.per.broker.percentage", "10";
    CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS: i64 = "controller.quorum.request.timeout.ms", "2000";
    // The admin port's console (tidelog's own; Kafka has no console).
    /// How often the lag history samples every group this node coordinates; it keeps
    /// 360 samples per group (an hour at the default).
    ADMIN_CONSOLE_LAG_HISTORY_INTERVAL_MS: i64 = "admin.console.lag.history.interval.ms", "10000";
    /// The console may act: create topics, add partitions, alter topic configs, delete
    /// records, reset offsets (read-only by default). With an authorizer on, each
    /// action is also checked against the ACLs as its Kafka API is.
    ADMIN_CONSOLE_ACTIONS_ENABLED: bool = "admin.console.actions.enabled", "false";
    /// PLAINTEXT (HTTP) or SSL (HTTPS) on the admin port. With SSL its certificate,
    /// trust store and `ssl.client.auth` are the `ssl.*` settings as given for it
    /// with `listener.name.admin.ssl.*`, else the broker's own `ssl.*`.
    ADMIN_LISTENER_SECURITY_PROTOCOL: String = "admin.listener.security.protocol", "PLAINTEXT";
    /// With an authorizer on, the admin port's paths answered without authentication
    /// (comma-separated, of /metrics, /healthz and /readyz: Prometheus and health
    /// checks); every other path needs a client certificate or HTTP Basic credentials
    /// of a SCRAM user. Empty: every path needs them.
    ADMIN_PUBLIC_PATHS: String = "admin.public.paths", "/metrics,/healthz,/readyz";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses_as_its_kind_and_every_name_is_unique() {
        let mut names = std::collections::BTreeSet::new();
        for (name, default, kind) in ALL {
            assert!(names.insert(*name), "{name} twice");
            let ok = match kind {
                Kind::Int => i64::parse(default).is_some(),
                Kind::Bool => bool::parse(default).is_some(),
                Kind::Text => true,
            };
            assert!(ok, "{name}: default {default:?} is not a {kind:?}");
        }
        assert_eq!(NUM_PARTITIONS.default_value(), Some(1));
        assert_eq!(CONTROLLED_SHUTDOWN_ENABLE.default_value(), Some(true));
    }
}
