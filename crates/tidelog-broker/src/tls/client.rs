//! The client side of TLS, for a broker connecting to another broker's SSL or SASL_SSL
//! inter-broker listener. As in Kafka, the broker uses that listener's own `ssl.*`
//! settings: it trusts the listener's truststore and presents its keystore (so a
//! listener with `ssl.client.auth=required` accepts its own brokers), and with
//! `ssl.endpoint.identification.algorithm=https` (the default) checks that the
//! certificate names the host it connects to.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::{pem, ListenerSsl, TlsError};
use crate::settings;

impl ListenerSsl<'_> {
    /// The TLS client that connects to this listener on other brokers. Reads the PEM
    /// files: call it off the async workers.
    pub(crate) fn client_tls(&self) -> Result<ClientConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        if self.get(settings::SSL_TRUSTSTORE_LOCATION).is_empty()
            && self.get(settings::SSL_TRUSTSTORE_CERTIFICATES).is_empty()
        {
            return Err(self.invalid(
                settings::SSL_TRUSTSTORE_LOCATION,
                "brokers connect to each other over this listener and must trust the CA \
                 that signed its certificates: set ssl.truststore.location (PEM)",
            ));
        }
        let mut roots = RootCertStore::empty();
        for cert in pem::truststore(self)? {
            roots
                .add(cert)
                .map_err(|e| self.invalid(settings::SSL_TRUSTSTORE_LOCATION, e.to_string()))?;
        }
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(|e| self.invalid(settings::SSL_TRUSTSTORE_LOCATION, e.to_string()))?;
        let algorithm = self.get(settings::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM);
        let verifier: Arc<dyn ServerCertVerifier> = match algorithm.to_ascii_lowercase().as_str() {
            "https" => webpki,
            "" => Arc::new(ChainOnly(webpki)),
            other => {
                return Err(self.invalid(
                    settings::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
                    format!("`{other}` is not https or empty"),
                ))
            }
        };
        let (chain, key) = pem::keystore(self)?;
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.protocol_versions()?)
            .map_err(|e| self.invalid(settings::SSL_ENABLED_PROTOCOLS, e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(chain, key)
            .map_err(|e| self.invalid(settings::SSL_KEYSTORE_LOCATION, e.to_string()))?;
        Ok(config)
    }
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain must verify against the
/// truststore, but the certificate need not name the host.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
