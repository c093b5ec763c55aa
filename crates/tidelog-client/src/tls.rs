//! TLS to SSL and SASL_SSL listeners (rustls with the ring provider), configured from
//! PEM files as librdkafka's `ssl.ca.location`, `ssl.certificate.location` and
//! `ssl.key.location` name them. The broker's certificate is verified against the CA
//! file and must name the host connected to.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::ClientError;

/// Where the system's CA bundle is on Debian and its derivatives; used when no CA file
/// is given.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A client TLS configuration shared by every connection of a client.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

fn config_error(reason: String) -> ClientError {
    ClientError::InvalidArgument(reason)
}

impl ClientTls {
    /// Trusts the certificates of `ca` (the system bundle when `None`); presents
    /// `cert` and `key` (both or neither) for mutual TLS.
    pub fn from_pem_files(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<ClientTls, ClientError> {
        let ca = ca.unwrap_or(Path::new(SYSTEM_CA_BUNDLE));
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(ca)
            .map_err(|e| config_error(format!("reading CA file {}: {e}", ca.display())))?;
        for c in certs {
            let c = c.map_err(|e| config_error(format!("CA file {}: {e}", ca.display())))?;
            roots
                .add(c)
                .map_err(|e| config_error(format!("CA file {}: {e}", ca.display())))?;
        }
        if roots.is_empty() {
            return Err(config_error(format!(
                "CA file {} holds no certificate",
                ca.display()
            )));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        let config = match (cert, key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        config_error(format!("reading certificate {}: {e}", cert.display()))
                    })?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    config_error(format!("reading private key {}: {e}", key.display()))
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| config_error(format!("client certificate: {e}")))?
            }
            _ => {
                return Err(config_error(
                    "a client certificate needs both its certificate and its key".into(),
                ))
            }
        };
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The TLS handshake over `tcp` with the broker at `addr` (`host:port`).
    pub(crate) async fn wrap(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> io::Result<TlsStream<TcpStream>> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.connector.connect(name, tcp).await
    }
}
