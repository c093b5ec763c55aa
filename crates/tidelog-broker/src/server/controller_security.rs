//! How a node secures the controller quorum's connections: the controller listener
//! (`controller.listener.names`, its first name) and its protocol in
//! `listener.security.protocol.map`, with that listener's `ssl.*` and SASL settings
//! (`listener.name.<controller>.*` first, as for every listener). Voters accept on it;
//! every node, voter or broker-only, connects to the voters with it.

use std::sync::Arc;

use tidelog_env::net::Transport;

use super::StartError;
use crate::config::BrokerConfig;
use crate::listeners::SecurityProtocol;
use crate::net::{InboundSecurity, OutboundSecurity, SecureListenTransport, SecureTransport};
use crate::sasl::{SaslListener, SaslLogin};

/// `inner` secured as the controller listener requires; `voter`: this node accepts
/// on it too.
pub(super) async fn controller_transport(
    config: &BrokerConfig,
    inner: &Arc<dyn Transport>,
    voter: bool,
) -> Result<Arc<dyn Transport>, StartError> {
    let Some((name, protocol)) = config.controller_listener()? else {
        return Ok(Arc::clone(inner));
    };
    let tls = matches!(protocol, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl);
    let sasl = matches!(
        protocol,
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
    );
    let served = if sasl && voter {
        Some(Arc::new(SaslListener::from_config(config, &name)?))
    } else {
        None
    };
    let outbound = OutboundSecurity {
        tls: if tls {
            Some(crate::tls::load_client(config, &name).await?)
        } else {
            None
        },
        sasl: if sasl {
            Some(SaslLogin::controller(config, &name, served.as_deref())?)
        } else {
            None
        },
    };
    let connecting = SecureTransport::wrap(Arc::clone(inner), outbound);
    if !voter {
        return Ok(connecting);
    }
    let tls_server = if tls {
        crate::tls::load_servers(config, vec![name.clone()])
            .await?
            .pop()
            .map(|(_, server)| server)
    } else {
        None
    };
    let admitted = crate::auth::Authorizer::from_config(config).map(|a| a.super_users().clone());
    tracing::info!(
        listener = %name,
        protocol = protocol.name(),
        "the controller listener is secured"
    );
    Ok(SecureListenTransport::wrap(
        connecting,
        InboundSecurity {
            listener: name,
            tls: tls_server,
            sasl: served,
            admitted,
        },
    ))
}
