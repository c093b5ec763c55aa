//! Kafka's PEM key and trust stores: `ssl.keystore.location` (one file with the
//! private key and the certificate chain) or the inline `ssl.keystore.key` +
//! `ssl.keystore.certificate.chain`; `ssl.truststore.location` or the inline
//! `ssl.truststore.certificates`.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::{ListenerSsl, TlsError};
use crate::settings::{self, Setting};

type Keystore = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

pub(super) fn keystore(ssl: &ListenerSsl<'_>) -> Result<Keystore, TlsError> {
    check_type(ssl, settings::SSL_KEYSTORE_TYPE)?;
    if !ssl.get(settings::SSL_KEYSTORE_PASSWORD).is_empty() {
        // As Kafka: a PEM keystore has no store password, only a key password.
        return Err(ssl.invalid(
            settings::SSL_KEYSTORE_PASSWORD,
            "a PEM keystore has no password (only ssl.key.password applies to PEM)",
        ));
    }
    let location = ssl.get(settings::SSL_KEYSTORE_LOCATION);
    let inline_chain = ssl.get(settings::SSL_KEYSTORE_CERTIFICATE_CHAIN);
    let inline_key = ssl.get(settings::SSL_KEYSTORE_KEY);
    let (chain_text, chain_setting, key_text, key_setting) = match (
        location.is_empty(),
        inline_chain.is_empty(),
        inline_key.is_empty(),
    ) {
        (false, true, true) => {
            let file = ssl.read(settings::SSL_KEYSTORE_LOCATION, &location)?;
            let loc = settings::SSL_KEYSTORE_LOCATION;
            (file.clone(), loc, file, loc)
        }
        (true, false, false) => (
            normalize_inline(&inline_chain).into_bytes(),
            settings::SSL_KEYSTORE_CERTIFICATE_CHAIN,
            normalize_inline(&inline_key).into_bytes(),
            settings::SSL_KEYSTORE_KEY,
        ),
        (true, true, true) => {
            return Err(ssl.invalid(
                settings::SSL_KEYSTORE_LOCATION,
                "an SSL listener needs its certificate and key: set ssl.keystore.location \
                 (one PEM file with both) or ssl.keystore.certificate.chain and ssl.keystore.key",
            ))
        }
        _ => {
            return Err(ssl.invalid(
                settings::SSL_KEYSTORE_LOCATION,
                "give either ssl.keystore.location or both ssl.keystore.certificate.chain \
                 and ssl.keystore.key",
            ))
        }
    };
    let chain = certificates(ssl, chain_setting, &chain_text)?;
    let key = private_key(ssl, key_setting, &key_text)?;
    Ok((chain, key))
}

pub(super) fn truststore(ssl: &ListenerSsl<'_>) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    check_type(ssl, settings::SSL_TRUSTSTORE_TYPE)?;
    let location = ssl.get(settings::SSL_TRUSTSTORE_LOCATION);
    let inline = ssl.get(settings::SSL_TRUSTSTORE_CERTIFICATES);
    match (location.is_empty(), inline.is_empty()) {
        (false, true) => {
            let file = ssl.read(settings::SSL_TRUSTSTORE_LOCATION, &location)?;
            certificates(ssl, settings::SSL_TRUSTSTORE_LOCATION, &file)
        }
        (true, false) => certificates(
            ssl,
            settings::SSL_TRUSTSTORE_CERTIFICATES,
            normalize_inline(&inline).as_bytes(),
        ),
        (true, true) => Err(ssl.invalid(
            settings::SSL_CLIENT_AUTH,
            "client authentication needs the CA certificates that sign client certificates: \
             set ssl.truststore.location",
        )),
        (false, false) => Err(ssl.invalid(
            settings::SSL_TRUSTSTORE_LOCATION,
            "give either ssl.truststore.location or ssl.truststore.certificates",
        )),
    }
}

fn check_type(ssl: &ListenerSsl<'_>, setting: Setting<String>) -> Result<(), TlsError> {
    let value = ssl.get(setting);
    if value.is_empty() || value.eq_ignore_ascii_case("PEM") {
        return Ok(());
    }
    Err(ssl.invalid(
        setting,
        format!(
            "`{value}` stores are not read: tidelog reads PEM (set {}=PEM)",
            setting.name
        ),
    ))
}

fn certificates(
    ssl: &ListenerSsl<'_>,
    setting: Setting<String>,
    text: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ssl.invalid(setting, format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(ssl.invalid(setting, "no PEM certificate (BEGIN CERTIFICATE) found"));
    }
    Ok(certs)
}

fn private_key(
    ssl: &ListenerSsl<'_>,
    setting: Setting<String>,
    text: &[u8],
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let as_text = String::from_utf8_lossy(text);
    if as_text.contains("Proc-Type: 4,ENCRYPTED") {
        // OpenSSL's legacy encryption of a PKCS#1/SEC1 key: Kafka's PEM stores read
        // only PKCS#8, and so does tidelog.
        return Err(ssl.invalid(
            setting,
            "the private key uses OpenSSL's legacy PEM encryption: convert it to encrypted \
             PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc -in key.pem -out key8.pem)",
        ));
    }
    if as_text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return decrypt_pkcs8(ssl, setting, &as_text);
    }
    PrivateKeyDer::from_pem_slice(text).map_err(|e| {
        ssl.invalid(
            setting,
            format!("no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })
}

/// An encrypted PKCS#8 key (PBES2, as `openssl pkcs8 -topk8` writes it), decrypted
/// with `ssl.key.password`, as Kafka's PEM keystore does. Neither the password nor
/// the key appears in an error.
fn decrypt_pkcs8(
    ssl: &ListenerSsl<'_>,
    setting: Setting<String>,
    text: &str,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let password = ssl.get(settings::SSL_KEY_PASSWORD);
    if password.is_empty() {
        return Err(ssl.invalid(
            setting,
            "the private key is encrypted and ssl.key.password is not set",
        ));
    }
    let begin = text
        .find("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        .unwrap_or(0);
    let end_marker = "-----END ENCRYPTED PRIVATE KEY-----";
    let end = text[begin..]
        .find(end_marker)
        .map_or(text.len(), |at| begin + at + end_marker.len());
    let bad = |e: &dyn std::fmt::Display| {
        ssl.invalid(setting, format!("bad encrypted PKCS#8 private key: {e}"))
    };
    let (_, der) =
        pkcs8::der::pem::decode_vec(&text.as_bytes()[begin..end]).map_err(|e| bad(&e))?;
    let encrypted =
        pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| bad(&e))?;
    let decrypted = encrypted.decrypt(password.as_bytes()).map_err(|_| {
        ssl.invalid(
            setting,
            "cannot decrypt the private key with ssl.key.password (wrong password, or an \
             encryption scheme other than PBES2 with PBKDF2 or scrypt and AES-CBC)",
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(decrypted.as_bytes().to_vec().into()))
}

/// Inline PEM as Kafka accepts it: possibly on one line (a properties value), with
/// the markers and base64 separated by spaces or by literal `\n`.
fn normalize_inline(text: &str) -> String {
    let text = text.replace("\\n", "\n");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("-----") {
        push_base64(&mut out, &rest[..start]);
        let after = &rest[start + 5..];
        let Some(end) = after.find("-----") else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&rest[start..start + 5 + end + 5]);
        out.push('\n');
        rest = &after[end + 5..];
    }
    push_base64(&mut out, rest);
    out
}

fn push_base64(out: &mut String, body: &str) {
    for word in body.split_whitespace() {
        out.push_str(word);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_inline;

    #[test]
    fn one_line_inline_pem_gets_its_lines_back() {
        let one_line = "-----BEGIN CERTIFICATE----- AAAA BBBB -----END CERTIFICATE-----";
        assert_eq!(
            normalize_inline(one_line),
            "-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n"
        );
        let escaped = "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----";
        assert_eq!(
            normalize_inline(escaped),
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        );
    }
}
