//! SASL on the SASL_PLAINTEXT and SASL_SSL listeners, configured with Kafka's names:
//! `sasl.enabled.mechanisms`, `sasl.server.max.receive.size`,
//! `connection.failed.authentication.delay.ms`, `connections.max.reauth.ms` (the
//! first and last also as `listener.name.<l>.*`) and each mechanism's
//! `listener.name.<l>.<mechanism>.sasl.jaas.config`.
//!
//! PLAIN checks the `user_<name>="<password>"` options of the listener's PLAIN JAAS
//! config (as Kafka's PlainServerCallbackHandler does; SCRAM credentials are not
//! consulted). SCRAM checks the credentials in the metadata image, which
//! AlterUserScramCredentials changes through the controller.
//!
//! The exchange itself runs in `net::sasl`; this module only reads the settings.

mod login;
mod mechanism;

pub(crate) use login::SaslLogin;
pub(crate) use mechanism::{MechanismServer, Step};

use std::collections::BTreeMap;
use std::time::Duration;

use tidelog_sasl::jaas;

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
    /// `connections.max.reauth.ms`; zero: sessions never expire.
    pub(crate) max_reauth: Duration,
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
                        "{entry} is not served by tidelog (it serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; Kafka's default is GSSAPI, so a SASL listener must name its mechanisms)"
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
            let setting = own(&format!(
                "{}.sasl.jaas.config",
                mechanism.name().to_ascii_lowercase()
            ));
            let expected = match mechanism {
                SaslMechanism::Plain => jaas::PLAIN_LOGIN_MODULE,
                SaslMechanism::Scram(_) => jaas::SCRAM_LOGIN_MODULE,
            };
            let Some(value) = config.text(&setting) else {
                if *mechanism == SaslMechanism::Plain {
                    return Err(error(
                        setting,
                        "PLAIN is enabled but has no JAAS config naming its users (user_<name>=\"<password>\")".to_string(),
                    ));
                }
                // SCRAM's server side needs nothing from JAAS: its users are in the
                // metadata.
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
        Ok(SaslListener {
            mechanisms,
            plain_users,
            max_receive_bytes: config.count(settings::SASL_SERVER_MAX_RECEIVE_SIZE),
            failure_delay: config.duration(settings::CONNECTION_FAILED_AUTHENTICATION_DELAY_MS),
            max_reauth: Setting::as_duration(reauth_ms),
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

#[cfg(test)]
mod tests;
