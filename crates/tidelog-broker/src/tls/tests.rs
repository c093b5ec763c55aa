use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use super::principal::{subject_dn, PrincipalRules};
use super::{client_principal, ListenerSsl};
use crate::config::BrokerConfig;

fn config() -> BrokerConfig {
    let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
    BrokerConfig::new(1, addr, addr, PathBuf::from("/tmp/x"))
}

struct Certs {
    ca_pem: String,
    server_pem: String,
    server_key: String,
    client_der: Vec<u8>,
}

fn certs() -> Certs {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test ca");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client.distinguished_name = rcgen::DistinguishedName::new();
    client
        .distinguished_name
        .push(DnType::OrganizationName, "Example, Inc");
    client.distinguished_name.push(DnType::CommonName, "alice");
    let client = client
        .signed_by(&KeyPair::generate().unwrap(), &ca)
        .unwrap();
    Certs {
        ca_pem: ca.pem(),
        server_pem: server.pem(),
        server_key: server_key.serialize_pem(),
        client_der: client.der().to_vec(),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn error(c: &BrokerConfig, listener: &str) -> String {
    match ListenerSsl::new(c, listener).server_tls() {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn keystore_from_one_file_or_inline_and_client_auth_needs_a_truststore() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let both = format!("{}{}", certs.server_key, certs.server_pem);
    let keystore = write(dir.path(), "server.pem", &both);
    let mut c = config();
    assert!(error(&c, "SSL").contains("needs its certificate and key"));
    c.set("ssl.keystore.location", &keystore).unwrap();
    ListenerSsl::new(&c, "SSL").server_tls().unwrap();
    c.set("ssl.client.auth", "required").unwrap();
    assert!(error(&c, "SSL").contains("ssl.truststore.location"));
    let ca = write(dir.path(), "ca.pem", &certs.ca_pem);
    c.set("ssl.truststore.location", &ca).unwrap();
    ListenerSsl::new(&c, "SSL").server_tls().unwrap();
    c.set("ssl.client.auth", "sometimes").unwrap();
    assert!(error(&c, "SSL").contains("ssl.client.auth"));
    // One listener's override wins over the broker's setting.
    c.set("listener.name.ssl.ssl.client.auth", "requested")
        .unwrap();
    ListenerSsl::new(&c, "SSL").server_tls().unwrap();

    let mut c = config();
    c.set("ssl.keystore.certificate.chain", &certs.server_pem)
        .unwrap();
    c.set("ssl.keystore.key", &certs.server_key.replace('\n', " "))
        .unwrap();
    ListenerSsl::new(&c, "SSL").server_tls().unwrap();
    c.set("ssl.keystore.location", &keystore).unwrap();
    assert!(error(&c, "SSL").contains("either"));
}

#[test]
fn bad_stores_are_refused_with_a_reason() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.set("ssl.keystore.location", "/nonexistent/server.pem")
        .unwrap();
    assert!(error(&c, "SSL").contains("cannot read ssl.keystore.location"));
    let only_cert = write(dir.path(), "cert.pem", &certs.server_pem);
    c.set("ssl.keystore.location", &only_cert).unwrap();
    assert!(error(&c, "SSL").contains("private key"));
    let encrypted = format!(
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n{}",
        certs.server_pem
    );
    let encrypted = write(dir.path(), "enc.pem", &encrypted);
    c.set("ssl.keystore.location", &encrypted).unwrap();
    c.set("ssl.key.password", "secret").unwrap();
    let refused = error(&c, "SSL");
    assert!(refused.contains("encrypted"), "{refused}");
    assert!(!refused.contains("secret"), "{refused}");
    let both = write(
        dir.path(),
        "both.pem",
        &format!("{}{}", certs.server_key, certs.server_pem),
    );
    c.set("ssl.keystore.location", &both).unwrap();
    c.set("ssl.keystore.type", "JKS").unwrap();
    assert!(error(&c, "SSL").contains("PEM"));
    c.set("ssl.keystore.type", "PEM").unwrap();
    c.set("ssl.keystore.password", "x").unwrap();
    assert!(error(&c, "SSL").contains("no password"));
    c.set("ssl.keystore.password", "").unwrap();
    c.set("ssl.enabled.protocols", "TLSv1.1").unwrap();
    assert!(error(&c, "SSL").contains("TLSv1.1"));
    c.set("ssl.enabled.protocols", "TLSv1.3").unwrap();
    ListenerSsl::new(&c, "SSL").server_tls().unwrap();
}

#[test]
fn the_principal_is_the_rfc2253_subject_mapped_by_the_rules() {
    let certs = certs();
    let dn = subject_dn(&certs.client_der).unwrap();
    assert_eq!(dn, r"CN=alice,O=Example\, Inc");
    let default = PrincipalRules::parse("DEFAULT").unwrap();
    assert_eq!(
        client_principal(Some(&certs.client_der), &default).unwrap(),
        r"User:CN=alice,O=Example\, Inc"
    );
    assert_eq!(client_principal(None, &default).unwrap(), "User:ANONYMOUS");
    let rules = PrincipalRules::parse(
        r"RULE:^CN=([a-zA-Z0-9.]*),O=Other$/$1/L, RULE:^CN=(.*?),O=(.*)$/$1@$2/U, DEFAULT",
    )
    .unwrap();
    assert_eq!(rules.apply("CN=Bob,O=Other").as_deref(), Some("bob"));
    assert_eq!(rules.apply("CN=x,O=y").as_deref(), Some("X@Y"));
    assert_eq!(rules.apply("OU=z").as_deref(), Some("OU=z"));
    let only = PrincipalRules::parse(r"RULE:^CN=(\w*)$/$1/").unwrap();
    assert_eq!(only.apply("OU=z"), None);
    assert!(client_principal(Some(&certs.client_der), &only).is_err());
    assert!(PrincipalRules::parse("RULE:x").is_err());
    assert!(PrincipalRules::parse("SOMETHING").is_err());
}

/// The reload logic with the keystore's first certificate as the thing built: a
/// changed file is read again, a broken one keeps the old certificate (until the
/// files change again), an unchanged one is not read at all.
#[test]
fn changed_keystore_files_are_reloaded_and_broken_ones_refused() {
    use super::{pem, Reloadable};
    let dir = tempfile::tempdir().unwrap();
    let first = certs();
    let keystore = write(
        dir.path(),
        "keystore.pem",
        &format!("{}{}", first.server_key, first.server_pem),
    );
    let mut c = config();
    c.set("ssl.keystore.location", &keystore).unwrap();
    let served = |ssl: &ListenerSsl<'_>| pem::keystore(ssl).map(|(chain, _)| chain[0].to_vec());
    let der = |pem_text: &str| {
        use rustls_pki_types::pem::PemObject;
        rustls_pki_types::CertificateDer::from_pem_slice(pem_text.as_bytes())
            .unwrap()
            .to_vec()
    };
    let tls = Reloadable::load(&c, "SSL", "server", served).unwrap();
    assert_eq!(*tls.current(), der(&first.server_pem));
    tls.check();
    assert_eq!(*tls.current(), der(&first.server_pem), "unchanged");

    let second = certs();
    // Replaced by rename, as cert-manager and `mv` do.
    let staged = write(
        dir.path(),
        "staged.pem",
        &format!("{}{}", second.server_key, second.server_pem),
    );
    std::fs::rename(&staged, &keystore).unwrap();
    tls.check();
    assert_eq!(*tls.current(), der(&second.server_pem), "reloaded");

    std::fs::write(&keystore, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
    tls.check();
    assert_eq!(*tls.current(), der(&second.server_pem), "kept");
    // A key that does not match the certificate is refused by the real build too.
    let mismatched = format!("{}{}", first.server_key, second.server_pem);
    std::fs::write(&keystore, mismatched).unwrap();
    assert!(error(&c, "SSL").contains("ssl.keystore.location"));
}
