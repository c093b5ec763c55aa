use std::net::SocketAddr;
use std::path::PathBuf;

use super::*;
use tidelog_sasl::scram::ScramMechanism;

fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
    let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
    let mut c = BrokerConfig::new(1, addr, addr, PathBuf::from("/tmp/x"));
    for (k, v) in pairs {
        c.set(k, v).unwrap();
    }
    c
}

const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

#[test]
fn a_kafka_server_properties_reads_unchanged() {
    let c = config(&[
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            PLAIN_JAAS,
        ),
        (
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
        ("connections.max.reauth.ms", "60000"),
        (
            "listener.name.sasl_plaintext.connections.max.reauth.ms",
            "5000",
        ),
    ]);
    let l = SaslListener::from_config(&c, "SASL_PLAINTEXT").unwrap();
    assert_eq!(
        l.mechanisms,
        [
            SaslMechanism::Plain,
            SaslMechanism::Scram(ScramMechanism::Sha512)
        ]
    );
    assert_eq!(l.plain_password("alice").as_deref(), Some("alice-secret"));
    assert_eq!(l.plain_password("bob"), None);
    assert_eq!(l.max_reauth, Duration::from_millis(5000));
    assert_eq!(l.max_receive_bytes, 524288);
    assert_eq!(l.failure_delay, Duration::from_millis(100));
    assert_eq!(l.enabled("PLAIN"), Some(SaslMechanism::Plain));
    assert_eq!(l.enabled("plain"), None);
    assert_eq!(l.enabled("SCRAM-SHA-256"), None);
    // The JAAS config is a secret: DescribeConfigs hides it.
    assert!(crate::config::is_sensitive(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    ));
    let other = SaslListener::from_config(&c, "OTHER");
    assert!(other.is_err(), "PLAIN without users on OTHER");
}

#[test]
fn per_listener_mechanisms_and_refusals() {
    let c = config(&[(
        "listener.name.external.sasl.enabled.mechanisms",
        "SCRAM-SHA-256",
    )]);
    let l = SaslListener::from_config(&c, "EXTERNAL").unwrap();
    assert_eq!(l.mechanisms, [SaslMechanism::Scram(ScramMechanism::Sha256)]);
    assert_eq!(l.max_reauth, Duration::ZERO);
    // Kafka's default, GSSAPI, is refused with a reason.
    let refused = SaslListener::from_config(&c, "INTERNAL")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("GSSAPI"), "{refused}");
    for (k, v) in [
        ("sasl.enabled.mechanisms", "GSSAPI,PLAIN"),
        ("sasl.enabled.mechanisms", " , "),
    ] {
        let c = config(&[(k, v)]);
        assert!(SaslListener::from_config(&c, "L").is_err(), "{v}");
    }
    let c = config(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.l.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
    ]);
    assert!(SaslListener::from_config(&c, "L").is_err());
    let c = config(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.l.plain.sasl.jaas.config", "broken"),
    ]);
    let refused = SaslListener::from_config(&c, "L").unwrap_err().to_string();
    assert!(refused.contains("control flag"), "{refused}");
    // Only known mechanisms' JAAS configs are accepted as settings.
    let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
    let mut c = BrokerConfig::new(1, addr, addr, PathBuf::from("/tmp/x"));
    assert!(c
        .set("listener.name.l.gssapi.sasl.jaas.config", "x")
        .is_err());
}

#[test]
fn the_inter_broker_login_comes_from_the_listeners_jaas_config() {
    let base = [
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
        ("listener.name.sasl_ssl.plain.sasl.jaas.config", PLAIN_JAAS),
    ];
    let login_with = |extra: &[(&str, &str)]| {
        let mut pairs = base.to_vec();
        pairs.extend_from_slice(extra);
        let c = config(&pairs);
        let served = SaslListener::from_config(&c, "SASL_SSL").unwrap();
        SaslLogin::inter_broker(&c, "SASL_SSL", &served)
    };
    // Kafka's default mechanism, GSSAPI, is refused with what to set instead.
    let refused = login_with(&[]).unwrap_err().to_string();
    assert!(
        refused.contains("sasl.mechanism.inter.broker.protocol"),
        "{refused}"
    );
    assert!(refused.contains("GSSAPI"), "{refused}");

    let login = login_with(&[("sasl.mechanism.inter.broker.protocol", "PLAIN")]).unwrap();
    assert_eq!(login.mechanism, SaslMechanism::Plain);
    assert_eq!(
        (login.username.as_str(), login.password.as_str()),
        ("admin", "admin-secret")
    );
    assert!(!format!("{login:?}").contains("admin-secret"));

    // SCRAM's login from the listener's SCRAM JAAS config, else sasl.jaas.config.
    let scram_jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";"#;
    let login = login_with(&[
        ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
        ("sasl.jaas.config", scram_jaas),
    ])
    .unwrap();
    assert_eq!(login.username, "broker");
    let missing = login_with(&[("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512")])
        .unwrap_err()
        .to_string();
    assert!(missing.contains("username and password"), "{missing}");
    let no_password = login_with(&[
        ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
        (
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="broker";"#,
        ),
    ])
    .unwrap_err()
    .to_string();
    assert!(no_password.contains("no password"), "{no_password}");

    // The mechanism must be one the listener enables.
    let not_enabled = login_with(&[("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256")])
        .unwrap_err()
        .to_string();
    assert!(
        not_enabled.contains("sasl.enabled.mechanisms"),
        "{not_enabled}"
    );
}

#[test]
fn oauthbearer_needs_kafkas_validator_and_a_key_set() {
    let handler = (
        "listener.name.l.oauthbearer.sasl.server.callback.handler.class",
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    );
    let c = config(&[
        ("sasl.enabled.mechanisms", "OAUTHBEARER"),
        handler,
        (
            "sasl.oauthbearer.jwks.endpoint.url",
            "file:///etc/idp/jwks.json",
        ),
        ("sasl.oauthbearer.expected.audience", "kafka, kafka-eu"),
        (
            "listener.name.l.oauthbearer.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        ),
    ]);
    let l = SaslListener::from_config(&c, "L").unwrap();
    assert_eq!(l.mechanisms, [SaslMechanism::OAuthBearer]);
    let oauth = format!("{:?}", l.oauth.as_ref().unwrap());
    assert!(oauth.contains("kafka-eu"), "{oauth}");
    // Without the handler class (Kafka's default would accept unsigned tokens), with
    // another class, without a URL, or with a URL of another scheme: refused.
    for (pairs, expected) in [
        (vec![], "unsigned tokens"),
        (
            vec![(
                "listener.name.l.oauthbearer.sasl.server.callback.handler.class",
                "com.example.MyHandler",
            )],
            "plug-in",
        ),
        (vec![handler], "jwks.endpoint.url"),
        (
            vec![handler, ("sasl.oauthbearer.jwks.endpoint.url", "ldap://x")],
            "not a file://",
        ),
        (
            vec![
                handler,
                (
                    "sasl.oauthbearer.jwks.endpoint.url",
                    "https://idp.example/keys",
                ),
                ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "0"),
            ],
            "positive",
        ),
    ] {
        let mut all = vec![("sasl.enabled.mechanisms", "OAUTHBEARER")];
        all.extend(pairs);
        let refused = SaslListener::from_config(&config(&all), "L")
            .unwrap_err()
            .to_string();
        assert!(refused.contains(expected), "{refused}");
    }
    // Another mechanism's server callback handler would change whom it admits: refused.
    let c = config(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.l.plain.sasl.jaas.config", PLAIN_JAAS),
        (
            "listener.name.l.plain.sasl.server.callback.handler.class",
            "com.example.PlainUsersFromLdap",
        ),
    ]);
    let refused = SaslListener::from_config(&c, "L").unwrap_err().to_string();
    assert!(refused.contains("plug-in"), "{refused}");
    // Brokers do not log in to each other with OAUTHBEARER.
    let c = config(&[
        ("sasl.enabled.mechanisms", "OAUTHBEARER"),
        handler,
        (
            "sasl.oauthbearer.jwks.endpoint.url",
            "file:///etc/idp/jwks.json",
        ),
        ("sasl.mechanism.inter.broker.protocol", "OAUTHBEARER"),
    ]);
    let served = SaslListener::from_config(&c, "L").unwrap();
    let refused = SaslLogin::inter_broker(&c, "L", &served)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("OAUTHBEARER"), "{refused}");
}
