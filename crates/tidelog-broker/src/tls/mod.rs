//! TLS for the listeners whose security protocol is SSL, configured with Kafka's PEM
//! style `ssl.*` settings, each of which a listener may override with
//! `listener.name.<name>.ssl.*`.
//!
//! Everything here reads files on a blocking thread (see `server.rs`), before the
//! listener serves and, when the key or trust store files change, again (`reload`).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use tokio_rustls::TlsAcceptor;

use crate::config::BrokerConfig;
use crate::settings::{self, Setting};

mod client;
mod pem;
mod principal;
mod reload;

pub(crate) use principal::{client_principal, PrincipalRules};
pub(crate) use reload::Reloadable;

/// A listener's TLS server, rebuilt when its files change.
pub(crate) type ServerTlsFiles = Reloadable<ServerTls>;
/// The TLS client for another broker's listener, rebuilt when its files change.
pub(crate) type ClientTlsFiles = Reloadable<rustls::ClientConfig>;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("listener {listener}: {setting}: {reason}")]
    Invalid {
        listener: String,
        setting: String,
        reason: String,
    },
    #[error("listener {listener}: cannot read {setting} {path}: {source}")]
    Read {
        listener: String,
        setting: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    None,
    Requested,
    Required,
}

/// What an SSL listener's connections need: the acceptor with its certificate and
/// client verification, and how a client certificate becomes a principal.
pub(crate) struct ServerTls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) rules: PrincipalRules,
}

/// One listener's view of the `ssl.*` settings: its override first, then the broker's.
pub(crate) struct ListenerSsl<'a> {
    config: &'a BrokerConfig,
    listener: &'a str,
}

impl<'a> ListenerSsl<'a> {
    pub(crate) fn new(config: &'a BrokerConfig, listener: &'a str) -> Self {
        ListenerSsl { config, listener }
    }

    /// The value in force, trimmed; empty when unset.
    fn get(&self, setting: Setting<String>) -> String {
        let own = format!(
            "listener.name.{}.{}",
            self.listener.to_ascii_lowercase(),
            setting.name
        );
        match self.config.text(&own) {
            Some(value) => value.trim().to_string(),
            None => self.config.get(setting).trim().to_string(),
        }
    }

    fn invalid(&self, setting: Setting<String>, reason: impl Into<String>) -> TlsError {
        TlsError::Invalid {
            listener: self.listener.to_string(),
            setting: setting.name.to_string(),
            reason: reason.into(),
        }
    }

    fn read(&self, setting: Setting<String>, path: &str) -> Result<Vec<u8>, TlsError> {
        std::fs::read(path).map_err(|source| TlsError::Read {
            listener: self.listener.to_string(),
            setting: setting.name.to_string(),
            path: PathBuf::from(path),
            source,
        })
    }

    fn client_auth(&self) -> Result<ClientAuth, TlsError> {
        let value = self.get(settings::SSL_CLIENT_AUTH);
        match value.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            _ => Err(self.invalid(
                settings::SSL_CLIENT_AUTH,
                format!("`{value}` is not none, requested or required"),
            )),
        }
    }

    fn protocol_versions(&self) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
        let setting = settings::SSL_ENABLED_PROTOCOLS;
        let mut versions = Vec::new();
        for name in self.get(setting).split(',').map(str::trim) {
            let version = match name {
                "" => continue,
                "TLSv1.2" => &rustls::version::TLS12,
                "TLSv1.3" => &rustls::version::TLS13,
                other => {
                    return Err(self.invalid(
                        setting,
                        format!("`{other}` is not served (TLSv1.2 and TLSv1.3 are)"),
                    ))
                }
            };
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        if versions.is_empty() {
            return Err(self.invalid(setting, "no protocol is enabled"));
        }
        Ok(versions)
    }

    /// Builds the listener's TLS server. Reads the PEM files: call it off the async
    /// workers.
    pub(crate) fn server_tls(&self) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (chain, key) = pem::keystore(self)?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&self.protocol_versions()?)
            .map_err(|e| self.invalid(settings::SSL_ENABLED_PROTOCOLS, e.to_string()))?;
        let builder = match self.client_auth()? {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => builder.with_client_cert_verifier(self.client_verifier(auth, &provider)?),
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| self.invalid(settings::SSL_KEYSTORE_LOCATION, e.to_string()))?;
        let rules = PrincipalRules::parse(&self.get(settings::SSL_PRINCIPAL_MAPPING_RULES))
            .map_err(|reason| self.invalid(settings::SSL_PRINCIPAL_MAPPING_RULES, reason))?;
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            rules,
        })
    }

    fn client_verifier(
        &self,
        auth: ClientAuth,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
        let mut roots = RootCertStore::empty();
        for cert in pem::truststore(self)? {
            roots
                .add(cert)
                .map_err(|e| self.invalid(settings::SSL_TRUSTSTORE_LOCATION, e.to_string()))?;
        }
        let builder =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
        let builder = if auth == ClientAuth::Requested {
            builder.allow_unauthenticated()
        } else {
            builder
        };
        builder
            .build()
            .map_err(|e| self.invalid(settings::SSL_TRUSTSTORE_LOCATION, e.to_string()))
    }
}

/// The TLS servers of the SSL listeners named in `names`, built on a blocking thread.
pub(crate) async fn load_servers(
    config: &BrokerConfig,
    names: Vec<String>,
) -> Result<Vec<(String, Arc<ServerTlsFiles>)>, TlsError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let config = config.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        names
            .into_iter()
            .map(|name| {
                let server = Reloadable::load(&config, &name, "server", |ssl| ssl.server_tls())?;
                Ok((name, Arc::new(server)))
            })
            .collect::<Result<Vec<_>, TlsError>>()
    })
    .await;
    loaded.unwrap_or_else(|e| {
        Err(TlsError::Invalid {
            listener: String::new(),
            setting: "ssl".to_string(),
            reason: format!("loading the TLS settings panicked: {e}"),
        })
    })
}

/// The TLS client for connecting to other brokers' listener `name`, built on a
/// blocking thread.
pub(crate) async fn load_client(
    config: &BrokerConfig,
    name: &str,
) -> Result<Arc<ClientTlsFiles>, TlsError> {
    let (config, name) = (config.clone(), name.to_string());
    let loaded = tokio::task::spawn_blocking(move || {
        Reloadable::load(&config, &name, "client", |ssl| ssl.client_tls())
    })
    .await;
    match loaded {
        Ok(client) => Ok(Arc::new(client?)),
        Err(e) => Err(TlsError::Invalid {
            listener: String::new(),
            setting: "ssl".to_string(),
            reason: format!("loading the TLS client settings panicked: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests;
