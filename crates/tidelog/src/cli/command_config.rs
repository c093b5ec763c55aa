//! `--command-config FILE`: the Kafka client properties of a secured listener, as
//! Kafka's tools take them (`kafka-topics --command-config`) and librdkafka names
//! them (`sasl.username`, `sasl.password`).
//!
//! security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. TLS trusts the PEM
//! CA file `ssl.ca.location` (or Kafka's `ssl.truststore.location` of type PEM; the
//! system bundle when neither is given) and presents `ssl.certificate.location` +
//! `ssl.key.location` when both are given.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tidelog_client::{ClientTls, SaslCredentials, SaslMechanism};
use tidelog_sasl::jaas;

/// What the file asks connections to do.
#[derive(Debug, Default)]
pub(crate) struct Security {
    pub(crate) sasl: Option<SaslCredentials>,
    pub(crate) tls: Option<ClientTls>,
}

/// Reads `path`; the TLS files it names are read too.
pub(crate) fn load(path: &Path) -> anyhow::Result<Security> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --command-config {}", path.display()))?;
    let parsed =
        from_properties(&text).with_context(|| format!("--command-config {}", path.display()))?;
    let tls = match parsed.tls {
        None => None,
        Some(files) => Some(
            ClientTls::from_pem_files(
                files.ca.as_deref(),
                files.certificate.as_deref(),
                files.key.as_deref(),
            )
            .with_context(|| format!("--command-config {}", path.display()))?,
        ),
    };
    Ok(Security {
        sasl: parsed.sasl,
        tls,
    })
}

/// The TLS files named by the properties.
#[derive(Debug, Default, PartialEq, Eq)]
struct TlsFiles {
    ca: Option<PathBuf>,
    certificate: Option<PathBuf>,
    key: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Parsed {
    sasl: Option<SaslCredentials>,
    tls: Option<TlsFiles>,
}

fn from_properties(text: &str) -> anyhow::Result<Parsed> {
    let properties = tidelog_broker::properties::parse(text)?;
    let get = |key: &str| {
        properties
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.trim().to_string())
    };
    let protocol = get("security.protocol").unwrap_or_else(|| "PLAINTEXT".into());
    let (tls, sasl) = match protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => bail!("security.protocol={other} is not a security protocol"),
    };
    let tls = if tls {
        if let Some(kind) = get("ssl.truststore.type") {
            if !kind.eq_ignore_ascii_case("PEM") {
                bail!("ssl.truststore.type={kind}: only PEM is read");
            }
        }
        Some(TlsFiles {
            ca: get("ssl.ca.location")
                .or_else(|| get("ssl.truststore.location"))
                .map(PathBuf::from),
            certificate: get("ssl.certificate.location").map(PathBuf::from),
            key: get("ssl.key.location").map(PathBuf::from),
        })
    } else {
        None
    };
    if !sasl {
        return Ok(Parsed { sasl: None, tls });
    }
    // Kafka's default mechanism is GSSAPI, which tidelog does not speak.
    let named = get("sasl.mechanism")
        .or_else(|| get("sasl.mechanisms"))
        .unwrap_or_else(|| "GSSAPI".into());
    let Some(mechanism) =
        SaslMechanism::from_name(&named).filter(|m| *m != SaslMechanism::OAuthBearer)
    else {
        bail!(
            "sasl.mechanism={named}: the tidelog CLI speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
        );
    };
    let (mut username, mut password) = (get("sasl.username"), get("sasl.password"));
    if let Some(config) = get("sasl.jaas.config") {
        let modules = jaas::parse(&config).context("sasl.jaas.config")?;
        if let Some(module) = modules.first() {
            username = username.or_else(|| module.options.get("username").cloned());
            password = password.or_else(|| module.options.get("password").cloned());
        }
    }
    let (Some(username), Some(password)) = (username, password) else {
        bail!("SASL needs sasl.username and sasl.password (or a sasl.jaas.config with username and password)");
    };
    Ok(Parsed {
        sasl: Some(SaslCredentials {
            mechanism,
            username,
            password,
        }),
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_client::ScramMechanism;

    #[test]
    fn kafka_and_librdkafka_property_forms() {
        let none = from_properties("# nothing\n").unwrap();
        assert!(none.sasl.is_none() && none.tls.is_none());
        let java = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"admin\" password=\"admin-secret\";\n";
        let creds = from_properties(java).unwrap().sasl.unwrap();
        assert_eq!(
            creds.mechanism,
            SaslMechanism::Scram(ScramMechanism::Sha512)
        );
        assert_eq!(creds.username, "admin");
        assert_eq!(creds.password, "admin-secret");
        let rdkafka = "security.protocol=sasl_plaintext\nsasl.mechanisms=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n";
        let creds = from_properties(rdkafka).unwrap().sasl.unwrap();
        assert_eq!(creds.mechanism, SaslMechanism::Plain);
        assert!(!format!("{creds:?}").contains("alice-secret"));
        let ssl = from_properties(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\nssl.truststore.location=ca.pem\n",
        )
        .unwrap();
        assert!(ssl.sasl.is_some());
        assert_eq!(ssl.tls.unwrap().ca, Some(PathBuf::from("ca.pem")));
        let mtls = from_properties(
            "security.protocol=SSL\nssl.ca.location=ca.pem\nssl.certificate.location=c.pem\nssl.key.location=c.key\n",
        )
        .unwrap();
        assert!(mtls.sasl.is_none());
        assert_eq!(mtls.tls.unwrap().key, Some(PathBuf::from("c.key")));
        for bad in [
            "security.protocol=SSL\nssl.truststore.type=JKS\n",
            "security.protocol=SASL_PLAINTEXT\nsasl.username=a\nsasl.password=b\n",
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n",
            "security.protocol=BOGUS\n",
        ] {
            assert!(from_properties(bad).is_err(), "{bad}");
        }
    }
}
