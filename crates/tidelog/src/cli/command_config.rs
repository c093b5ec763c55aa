//! `--command-config FILE`: the Kafka client properties of a secured listener, as
//! Kafka's tools take them (`kafka-topics --command-config`) and librdkafka names
//! them (`sasl.username`, `sasl.password`).
//!
//! The CLI's connections are TCP only: security.protocol PLAINTEXT or SASL_PLAINTEXT.
//! SSL and SASL_SSL are refused with a reason rather than sent in the clear.

use std::path::Path;

use anyhow::{bail, Context};
use tidelog_client::{SaslCredentials, SaslMechanism};
use tidelog_sasl::jaas;

/// The SASL credentials the file asks for; `None` for PLAINTEXT.
pub(crate) fn load(path: &Path) -> anyhow::Result<Option<SaslCredentials>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --command-config {}", path.display()))?;
    from_properties(&text).with_context(|| format!("--command-config {}", path.display()))
}

fn from_properties(text: &str) -> anyhow::Result<Option<SaslCredentials>> {
    let properties = tidelog_broker::properties::parse(text)?;
    let get = |key: &str| {
        properties
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.trim().to_string())
    };
    let protocol = get("security.protocol").unwrap_or_else(|| "PLAINTEXT".into());
    match protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => return Ok(None),
        "SASL_PLAINTEXT" => {}
        "SSL" | "SASL_SSL" => bail!(
            "security.protocol={protocol}: the tidelog CLI does not speak TLS yet; use a PLAINTEXT or SASL_PLAINTEXT listener"
        ),
        other => bail!("security.protocol={other} is not a security protocol"),
    }
    // Kafka's default mechanism is GSSAPI, which tidelog does not speak.
    let named = get("sasl.mechanism")
        .or_else(|| get("sasl.mechanisms"))
        .unwrap_or_else(|| "GSSAPI".into());
    let Some(mechanism) = SaslMechanism::from_name(&named) else {
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
    Ok(Some(SaslCredentials {
        mechanism,
        username,
        password,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_client::ScramMechanism;

    #[test]
    fn kafka_and_librdkafka_property_forms() {
        assert_eq!(from_properties("# nothing\n").unwrap(), None);
        let java = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"admin\" password=\"admin-secret\";\n";
        let creds = from_properties(java).unwrap().unwrap();
        assert_eq!(
            creds.mechanism,
            SaslMechanism::Scram(ScramMechanism::Sha512)
        );
        assert_eq!(creds.username, "admin");
        assert_eq!(creds.password, "admin-secret");
        let rdkafka = "security.protocol=sasl_plaintext\nsasl.mechanisms=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n";
        let creds = from_properties(rdkafka).unwrap().unwrap();
        assert_eq!(creds.mechanism, SaslMechanism::Plain);
        assert!(!format!("{creds:?}").contains("alice-secret"));
        for bad in [
            "security.protocol=SASL_SSL\n",
            "security.protocol=SASL_PLAINTEXT\nsasl.username=a\nsasl.password=b\n",
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n",
            "security.protocol=BOGUS\n",
        ] {
            assert!(from_properties(bad).is_err(), "{bad}");
        }
    }
}
