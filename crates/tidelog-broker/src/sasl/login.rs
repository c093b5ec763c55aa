//! Who this broker is when it authenticates to another broker's SASL inter-broker
//! listener: `sasl.mechanism.inter.broker.protocol`, with the `username` and `password`
//! options of that listener's JAAS config for the mechanism
//! (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`), as
//! Kafka's brokers read them.

use tidelog_sasl::jaas;

use super::{SaslConfigError, SaslListener, SaslMechanism};
use crate::config::BrokerConfig;
use crate::settings;

/// A broker's own SASL credentials. `Debug` leaves the password out.
#[derive(Clone)]
pub(crate) struct SaslLogin {
    pub(crate) mechanism: SaslMechanism,
    pub(crate) username: String,
    pub(crate) password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl SaslLogin {
    /// The login for inter-broker listener `listener`, whose server side is `served`.
    pub(crate) fn inter_broker(
        config: &BrokerConfig,
        listener: &str,
        served: &SaslListener,
    ) -> Result<SaslLogin, SaslConfigError> {
        let setting = settings::SASL_MECHANISM_INTER_BROKER_PROTOCOL;
        SaslLogin::for_listener(config, listener, setting, Some(served))
    }

    /// The login for the controller listener `listener` (`sasl.mechanism.controller.protocol`);
    /// `served`: its server side, on a node that runs a voter.
    pub(crate) fn controller(
        config: &BrokerConfig,
        listener: &str,
        served: Option<&SaslListener>,
    ) -> Result<SaslLogin, SaslConfigError> {
        let setting = settings::SASL_MECHANISM_CONTROLLER_PROTOCOL;
        let login = SaslLogin::for_listener(config, listener, setting, served)?;
        if login.mechanism != SaslMechanism::Plain {
            return Err(SaslConfigError {
                listener: listener.to_string(),
                setting: setting.name.to_string(),
                reason: format!(
                    "{}: the controller listener authenticates with PLAIN (SCRAM credentials are kept in the metadata the quorum itself carries, so they cannot admit its own members)",
                    login.mechanism.name()
                ),
            });
        }
        Ok(login)
    }

    /// The mechanism `setting` names, with `username` and `password` from `listener`'s
    /// JAAS config for it; the mechanism must be one `served` offers.
    fn for_listener(
        config: &BrokerConfig,
        listener: &str,
        setting: settings::Setting<String>,
        served: Option<&SaslListener>,
    ) -> Result<SaslLogin, SaslConfigError> {
        let error = |setting: &str, reason: String| SaslConfigError {
            listener: listener.to_string(),
            setting: setting.to_string(),
            reason,
        };
        let named = config.get(setting).trim().to_string();
        let Some(mechanism) = SaslMechanism::from_name(&named) else {
            return Err(error(
                setting.name,
                format!(
                    "{named} is not served by tidelog (Kafka's default is GSSAPI): set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                ),
            ));
        };
        if mechanism == SaslMechanism::OAuthBearer {
            return Err(error(
                setting.name,
                "OAUTHBEARER: brokers do not log in to each other with tokens here (no token endpoint client); use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512".to_string(),
            ));
        }
        if served.is_some_and(|served| !served.mechanisms.contains(&mechanism)) {
            return Err(error(
                setting.name,
                format!(
                    "{} must be one of the listener's sasl.enabled.mechanisms",
                    mechanism.name()
                ),
            ));
        }
        let own = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            listener.to_ascii_lowercase(),
            mechanism.name().to_ascii_lowercase()
        );
        let (jaas_setting, text) = match config.text(&own) {
            Some(text) => (own.clone(), text.to_string()),
            None => (
                settings::SASL_JAAS_CONFIG.name.to_string(),
                config.get(settings::SASL_JAAS_CONFIG),
            ),
        };
        if text.trim().is_empty() {
            return Err(error(
                &own,
                format!(
                    "nodes authenticate to listener {listener} with {}: its JAAS config must give this node's username and password",
                    mechanism.name()
                ),
            ));
        }
        let modules = jaas::parse(&text).map_err(|e| error(&jaas_setting, e.to_string()))?;
        let option = |name: &str| {
            modules
                .iter()
                .find_map(|m| m.options.get(name))
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| {
                    error(
                        &jaas_setting,
                        format!("the JAAS config has no {name}: this node needs it to authenticate to listener {listener}"),
                    )
                })
        };
        Ok(SaslLogin {
            mechanism,
            username: option("username")?,
            password: option("password")?,
        })
    }
}
