//! Who asks on the admin port. Without an authorizer (security off) nobody is asked who
//! they are and every view is shown, as always. With one (`authorizer.class.name`),
//! every path but `admin.public.paths` needs a principal, and what it may see and do on
//! the port is what the same ACLs let it see and do through Kafka's APIs (the checks
//! are in `admin_http` and `admin_actions`, through [`Access`]). A principal comes from
//!
//! - HTTP Basic credentials of a SCRAM user: the password is checked against the
//!   user's SCRAM credentials in the metadata image (the salted password derived again
//!   with the stored salt and iterations, its StoredKey compared in constant time), and
//!   the principal is `User:<name>`. Basic sends the password with every request: over
//!   plain HTTP anyone on the path reads it, so serve the port with SSL;
//! - else a client certificate, when the port is HTTPS
//!   (`admin.listener.security.protocol=SSL`) and `ssl.client.auth` asks for one: the
//!   principal from its subject by `ssl.principal.mapping.rules`, as on an SSL listener.
//!
//! A wrong password is answered after `connection.failed.authentication.delay.ms`, as
//! Kafka delays a failed SASL authentication, and every attempt is counted in
//! `tidelog_authentication_total{listener="ADMIN"}`. No password is logged or kept.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use tidelog_controller::MetadataImage;
use tidelog_sasl::scram::{ScramCredential, ScramMechanism};

use crate::auth::{Access, Authorizer};
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::settings;

/// The name the admin port goes by: its `ssl.*` overrides are
/// `listener.name.admin.ssl.*`, its authentications are counted under it.
pub(crate) const LISTENER: &str = "ADMIN";
/// The paths `admin.public.paths` may open: what Prometheus and health checks read.
const OPENABLE: [&str; 3] = ["/metrics", "/healthz", "/readyz"];
/// The challenge a browser answers with its login prompt.
pub(crate) const CHALLENGE: &str = "Basic realm=\"tidelog admin\", charset=\"UTF-8\"";
/// `Authorization` headers longer than this are not credentials anyone uses.
const MAX_CREDENTIALS: usize = 1024;

/// `admin.listener.security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdminProtocol {
    Plaintext,
    Ssl,
}

impl AdminProtocol {
    pub(crate) fn parse(value: &str) -> Result<AdminProtocol, String> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(AdminProtocol::Plaintext),
            "SSL" => Ok(AdminProtocol::Ssl),
            other => Err(format!(
                "`{other}` is not PLAINTEXT or SSL (SASL is not spoken over HTTP: HTTP Basic credentials of a SCRAM user are checked on either)"
            )),
        }
    }
}

/// The paths of `admin.public.paths`.
pub(crate) fn public_paths(value: &str) -> Result<Vec<String>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            if OPENABLE.contains(&p) {
                Ok(p.to_string())
            } else {
                Err(format!(
                    "`{p}` cannot be public: only {} can",
                    OPENABLE.join(", ")
                ))
            }
        })
        .collect()
}

/// How the admin port checks who asks, when an authorizer is on.
pub(crate) struct AdminSecurity {
    authorizer: Arc<Authorizer>,
    public_paths: Vec<String>,
    failure_delay: Duration,
}

impl AdminSecurity {
    /// `None` without an authorizer: the port checks nobody.
    pub(crate) fn from_config(
        config: &BrokerConfig,
        authorizer: Option<Arc<Authorizer>>,
    ) -> Option<AdminSecurity> {
        let authorizer = authorizer?;
        Some(AdminSecurity {
            authorizer,
            // Checked at start-up (`setting_rules`).
            public_paths: public_paths(&config.get(settings::ADMIN_PUBLIC_PATHS))
                .unwrap_or_default(),
            failure_delay: Duration::from_millis(
                u64::try_from(config.get(settings::CONNECTION_FAILED_AUTHENTICATION_DELAY_MS))
                    .unwrap_or(0),
            ),
        })
    }

    pub(crate) fn is_public(&self, path: &str) -> bool {
        self.public_paths.iter().any(|p| p == path)
    }
}

/// HTTP Basic credentials as a request carried them.
pub(crate) struct BasicCredentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl BasicCredentials {
    /// The value of an `Authorization` header: `Basic base64(user:password)`. None
    /// for another scheme or a malformed value (answered as no credentials).
    pub(crate) fn parse(header: &str) -> Option<BasicCredentials> {
        if header.len() > MAX_CREDENTIALS {
            return None;
        }
        let (scheme, encoded) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = String::from_utf8(B64.decode(encoded.trim()).ok()?).ok()?;
        let (user, password) = decoded.split_once(':')?;
        (!user.is_empty()).then(|| BasicCredentials {
            user: user.to_string(),
            password: password.to_string(),
        })
    }
}

/// Why a request gets 401.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unauthenticated {
    /// It carried no credentials (a browser's first request does that).
    NoCredentials,
    /// The user has no SCRAM credential or the password is not its password.
    WrongCredentials,
}

/// Who asks and what they may do. `tls_principal` is the client certificate's
/// principal (`User:ANONYMOUS` without one).
pub(crate) async fn authenticate(
    security: Option<&AdminSecurity>,
    image: Arc<MetadataImage>,
    basic: Option<BasicCredentials>,
    tls_principal: String,
    peer: IpAddr,
    metrics: &Metrics,
) -> Result<Access, Unauthenticated> {
    let Some(security) = security else {
        return Ok(Access::of(None, &image, tls_principal, peer));
    };
    let authorizer = Some(&*security.authorizer);
    if let Some(basic) = basic {
        let user = basic.user.clone();
        let lookup = Arc::clone(&image);
        let verified = tokio::task::spawn_blocking(move || password_verifies(&lookup, &basic))
            .await
            .unwrap_or(false);
        if verified {
            metrics
                .requests
                .authentication(LISTENER, "HTTP-BASIC", "success");
            return Ok(Access::of(authorizer, &image, format!("User:{user}"), peer));
        }
        metrics
            .requests
            .authentication(LISTENER, "HTTP-BASIC", "failure");
        tracing::info!(%peer, user, "admin port: failed authentication (HTTP Basic)");
        tokio::time::sleep(security.failure_delay).await;
        return Err(Unauthenticated::WrongCredentials);
    }
    if tls_principal != "User:ANONYMOUS" {
        metrics.requests.authentication(LISTENER, "TLS", "success");
        return Ok(Access::of(authorizer, &image, tls_principal, peer));
    }
    Err(Unauthenticated::NoCredentials)
}

/// Whether the password is the user's, by any of its SCRAM credentials. A user with
/// none costs the same derivation, so the time taken does not tell who exists.
fn password_verifies(image: &MetadataImage, basic: &BasicCredentials) -> bool {
    let mut checked = false;
    for mechanism in [ScramMechanism::Sha512, ScramMechanism::Sha256] {
        let Some(stored) = image.scram_credential(&basic.user, mechanism.type_id()) else {
            continue;
        };
        checked = true;
        let credential = ScramCredential {
            salt: stored.salt.clone(),
            stored_key: stored.stored_key.clone(),
            server_key: stored.server_key.clone(),
            iterations: u32::try_from(stored.iterations).unwrap_or(0),
        };
        if credential.verifies(mechanism, &basic.password) {
            return true;
        }
    }
    if !checked {
        let decoy = ScramCredential {
            salt: vec![0; 16],
            stored_key: Vec::new(),
            server_key: Vec::new(),
            iterations: 4096,
        };
        decoy.verifies(ScramMechanism::Sha256, &basic.password);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_from_the_authorization_header() {
        let header = format!("Basic {}", B64.encode("alice:pa:ss word"));
        let c = BasicCredentials::parse(&header).unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_str()),
            ("alice", "pa:ss word")
        );
        assert!(
            !format!("{c:?}").contains("pa:ss"),
            "the password stays out of logs"
        );
        let lower = format!("basic {}", B64.encode("bob:"));
        assert_eq!(BasicCredentials::parse(&lower).unwrap().password, "");
        for bad in [
            "Bearer abc".to_string(),
            "Basic !!!".to_string(),
            format!("Basic {}", B64.encode("no-colon")),
            format!("Basic {}", B64.encode(":nobody")),
            format!("Basic {}", "A".repeat(2000)),
        ] {
            assert!(BasicCredentials::parse(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn only_the_scrape_and_health_paths_can_be_public() {
        assert_eq!(
            public_paths(" /metrics , /healthz,").unwrap(),
            vec!["/metrics".to_string(), "/healthz".to_string()]
        );
        assert!(public_paths("").unwrap().is_empty());
        assert!(public_paths("/metrics,/v1/topics").is_err());
        assert_eq!(AdminProtocol::parse("ssl"), Ok(AdminProtocol::Ssl));
        assert!(AdminProtocol::parse("SASL_SSL").is_err());
    }
}
