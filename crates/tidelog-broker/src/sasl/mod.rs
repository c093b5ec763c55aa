//! SASL on the SASL_PLAINTEXT and SASL_SSL listeners, configured with Kafka's names:
//! `sasl.enabled.mechanisms`, `sasl.server.max.receive.size`,
//! `connection.failed.authentication.delay.ms`, `connections.max.reauth.ms` (the
//! first and last also as `listener.name.<l>.*`) and each mechanism's
//! `listener.name.<l>.<mechanism>.sasl.jaas.config`.
//!
//! PLAIN checks the `user_<name>="<password>"` options of the listener's PLAIN JAAS
//! config (as Kafka's PlainServerCallbackHandler does; SCRAM credentials are not
//! consulted). SCRAM checks the credentials in the metadata image, which
//! AlterUserScramCredentials changes through the controller. OAUTHBEARER checks a
//! signed JWT against a JWKS (`oauth`), with the `sasl.oauthbearer.*` settings.
//!
//! The exchange itself runs in `net::sasl`; this module only reads the settings.

mod jwks_fetch;
mod login;
mod mechanism;
mod oauth;

pub(crate) use login::SaslLogin;
pub(crate) use mechanism::{Authenticated, MechanismServer, Step};
pub(crate) use oauth::unix_millis;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tidelog_sasl::jaas;
use tidelog_sasl::oauthbearer::jwt::Rules;

use oauth::{OAuthValidator, RefreshPolicy};

use crate::config::BrokerConfig;
use crate::settings::{self, Setting};

/// A mechanism tidelog serves.
pub(crate) use tidelog_sasl::login::Mechanism as SaslMechanism;

#[derive(Debug, thiserror::Error)]
#[error("listener {listener}: {setting}: {reason}")]
pub struct SaslConfigError {
    listener: String,
    setting: String,
    reason: String,
}

/// What a SASL listener's connections are authenticated with.
pub(crate) struct SaslListener {
    /// Offered in this order (what SaslHandshake answers).
    pub(crate) mechanisms: Vec<SaslMechanism>,
    /// PLAIN's users and passwords, from the PLAIN JAAS config.
    plain_users: BTreeMap<String, String>,
    /// The largest frame read before authentication completes.
    pub(crate) max_receive_bytes: usize,
    /// How long a failed authentication waits before its connection closes.
    pub(crate) failure_delay: Duration,
    /// `connections.max.reauth.ms`; zero: sessions never expire (OAUTHBEARER's
    /// still end with their token).
    pub(crate) max_reauth: Duration,
    /// OAUTHBEARER's token validation, when the listener enables it.
    pub(crate) oauth: Option<Arc<OAuthValidator>>,
}

impl std::fmt::Debug for SaslListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslListener")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.len())
            .finish_non_exhaustive()
    }
}

impl SaslListener {
    /// Reads listener `name`'s SASL settings; errors say which setting is wrong.
    pub(crate) fn from_config(
        config: &BrokerConfig,
        name: &str,
    ) -> Result<SaslListener, SaslConfigError> {
        let own = |setting: &str| format!("listener.name.{}.{setting}", name.to_ascii_lowercase());
        let text = |setting: Setting<String>| {
            config
                .text(&own(setting.name))
                .map_or_else(|| config.get(setting), str::to_string)
        };
        let error = |setting: String, reason: String| SaslConfigError {
            listener: name.to_string(),
            setting,
            reason,
        };
        let mut mechanisms = Vec::new();
        let listed = text(settings::SASL_ENABLED_MECHANISMS);
        for entry in listed.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some(mechanism) = SaslMechanism::from_name(entry) else {
                return Err(error(
                    settings::SASL_ENABLED_MECHANISMS.name.to_string(),
                    format!(
                        "{entry} is not served by tidelog (it serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER; Kafka's default is GSSAPI, so a SASL listener must name its mechanisms)"
                    ),
                ));
            };
            if !mechanisms.contains(&mechanism) {
                mechanisms.push(mechanism);
            }
        }
        if mechanisms.is_empty() {
            return Err(error(
                settings::SASL_ENABLED_MECHANISMS.name.to_string(),
                "no mechanism enabled".to_string(),
            ));
        }
        let mut plain_users = BTreeMap::new();
        for mechanism in &mechanisms {
            let handler = own(&format!(
                "{}.sasl.server.callback.handler.class",
                mechanism.name().to_ascii_lowercase()
            ));
            let custom = config.text(&handler).is_some_and(|c| !c.trim().is_empty());
            if custom && *mechanism != SaslMechanism::OAuthBearer {
                // Kafka would look this mechanism's users up through the class.
                return Err(error(
                    handler,
                    "tidelog cannot load Java plug-in classes: PLAIN's users come from its JAAS config, SCRAM's from the metadata".to_string(),
                ));
            }
            let setting = own(&format!(
                "{}.sasl.jaas.config",
                mechanism.name().to_ascii_lowercase()
            ));
            let expected = match mechanism {
                SaslMechanism::Plain => jaas::PLAIN_LOGIN_MODULE,
                SaslMechanism::Scram(_) => jaas::SCRAM_LOGIN_MODULE,
                SaslMechanism::OAuthBearer => jaas::OAUTHBEARER_LOGIN_MODULE,
            };
            let Some(value) = config.text(&setting) else {
                if *mechanism == SaslMechanism::Plain {
                    return Err(error(
                        setting,
                        "PLAIN is enabled but has no JAAS config naming its users (user_<name>=\"<password>\")".to_string(),
                    ));
                }
                // SCRAM's and OAUTHBEARER's server sides need nothing from JAAS: the
                // users are in the metadata, the token checks in sasl.oauthbearer.*.
                continue;
            };
            let modules = jaas::parse(value).map_err(|e| error(setting.clone(), e.to_string()))?;
            let [module] = modules.as_slice() else {
                return Err(error(
                    setting,
                    format!(
                        "the JAAS config has {} login modules; a listener's mechanism takes exactly one",
                        modules.len()
                    ),
                ));
            };
            if module.class != expected {
                return Err(error(
                    setting,
                    format!("login module {} is not {expected}", module.class),
                ));
            }
            if *mechanism == SaslMechanism::Plain {
                plain_users = module.plain_users();
            }
        }
        let reauth_ms = config
            .text(&own(settings::CONNECTIONS_MAX_REAUTH_MS.name))
            .map_or(Ok(config.get(settings::CONNECTIONS_MAX_REAUTH_MS)), |v| {
                v.trim().parse::<i64>().map_err(|_| {
                    error(
                        own(settings::CONNECTIONS_MAX_REAUTH_MS.name),
                        format!("`{v}` is not a number of milliseconds"),
                    )
                })
            })?;
        let oauth = if mechanisms.contains(&SaslMechanism::OAuthBearer) {
            Some(Arc::new(oauth_validator(config, name)?))
        } else {
            None
        };
        Ok(SaslListener {
            mechanisms,
            plain_users,
            max_receive_bytes: config.count(settings::SASL_SERVER_MAX_RECEIVE_SIZE),
            failure_delay: config.duration(settings::CONNECTION_FAILED_AUTHENTICATION_DELAY_MS),
            max_reauth: Setting::as_duration(reauth_ms),
            oauth,
        })
    }

    /// Reads what the listener needs from outside before it serves: OAUTHBEARER's
    /// key set (see [`OAuthValidator::load_at_start`]).
    pub(crate) async fn prepare(&self, name: &str) -> Result<(), SaslConfigError> {
        let Some(oauth) = &self.oauth else {
            return Ok(());
        };
        oauth
            .load_at_start()
            .await
            .map_err(|reason| SaslConfigError {
                listener: name.to_string(),
                setting: settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_URL
                    .name
                    .to_string(),
                reason,
            })
    }

    pub(crate) fn enabled(&self, name: &str) -> Option<SaslMechanism> {
        // Kafka compares mechanism names exactly.
        self.mechanisms.iter().copied().find(|m| m.name() == name)
    }

    pub(crate) fn plain_password(&self, user: &str) -> Option<String> {
        self.plain_users.get(user).cloned()
    }
}

/// Listener `name`'s OAUTHBEARER validation from Kafka's settings: the server
/// callback handler must be Kafka's OAuthBearerValidatorCallbackHandler, whose rules
/// tidelog follows (no other class can be loaded).
fn oauth_validator(config: &BrokerConfig, name: &str) -> Result<OAuthValidator, SaslConfigError> {
    let own = |setting: &str| format!("listener.name.{}.{setting}", name.to_ascii_lowercase());
    let error = |setting: String, reason: String| SaslConfigError {
        listener: name.to_string(),
        setting,
        reason,
    };
    let handler_setting = own("oauthbearer.sasl.server.callback.handler.class");
    match config.text(&handler_setting).map(str::trim) {
        Some(oauth::VALIDATOR_CLASS) => {}
        None | Some("") => {
            return Err(error(
                handler_setting,
                format!(
                    "OAUTHBEARER is enabled without a server callback handler: Kafka's default accepts unsigned tokens (OAuthBearerUnsecuredValidatorCallbackHandler, for tests only) and is not served; set it to {} with sasl.oauthbearer.jwks.endpoint.url",
                    oauth::VALIDATOR_CLASS
                ),
            ))
        }
        Some(other) => {
            return Err(error(
                handler_setting,
                format!(
                    "{other}: tidelog cannot load Java plug-in classes; it validates tokens as {} does",
                    oauth::VALIDATOR_CLASS
                ),
            ))
        }
    }
    let text = |setting: Setting<String>| {
        config
            .text(&own(setting.name))
            .map_or_else(|| config.get(setting), str::to_string)
            .trim()
            .to_string()
    };
    let millis = |setting: Setting<i64>| -> Result<i64, SaslConfigError> {
        let value = match config.text(&own(setting.name)) {
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map_err(|_| error(own(setting.name), format!("`{v}` is not a number")))?,
            None => config.get(setting),
        };
        if value < 0 {
            return Err(error(
                setting.name.to_string(),
                "must not be negative".to_string(),
            ));
        }
        Ok(value)
    };
    let url = text(settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_URL);
    if url.is_empty() {
        return Err(error(
            settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_URL.name.to_string(),
            "OAUTHBEARER tokens are checked against the keys at this URL (file:///path/jwks.json or https://...): set it".to_string(),
        ));
    }
    let source = jwks_fetch::JwksSource::parse(&url).map_err(|reason| {
        error(
            settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_URL
                .name
                .to_string(),
            reason,
        )
    })?;
    let refresh_ms = millis(settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS)?;
    if refresh_ms == 0 {
        return Err(error(
            settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS
                .name
                .to_string(),
            "must be positive".to_string(),
        ));
    }
    let policy = RefreshPolicy {
        every: Setting::as_duration(refresh_ms),
        backoff: Setting::as_duration(millis(
            settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS,
        )?),
        backoff_max: Setting::as_duration(millis(
            settings::SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS,
        )?),
        kid_interval: oauth::KID_REFRESH_INTERVAL,
    };
    let non_empty = |setting: Setting<String>| -> Result<String, SaslConfigError> {
        let value = text(setting);
        if value.is_empty() {
            return Err(error(
                setting.name.to_string(),
                "must not be empty".to_string(),
            ));
        }
        Ok(value)
    };
    let issuer = text(settings::SASL_OAUTHBEARER_EXPECTED_ISSUER);
    let rules = Rules {
        expected_audiences: text(settings::SASL_OAUTHBEARER_EXPECTED_AUDIENCE)
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
        expected_issuer: (!issuer.is_empty()).then_some(issuer),
        clock_skew_secs: millis(settings::SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS)?,
        sub_claim: non_empty(settings::SASL_OAUTHBEARER_SUB_CLAIM_NAME)?,
        scope_claim: non_empty(settings::SASL_OAUTHBEARER_SCOPE_CLAIM_NAME)?,
    };
    Ok(OAuthValidator::new(rules, source, url, policy))
}

#[cfg(test)]
mod tests;
