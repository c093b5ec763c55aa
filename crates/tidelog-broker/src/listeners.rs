//! Kafka's listener settings: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and `inter.broker.listener.name`.
//!
//! A listener is a name, a bind address and, through the protocol map, a security
//! protocol. Clients are answered with the endpoints of the listener they connected
//! through, so a broker can be reached as `PLAINTEXT://10.0.0.5:9092` inside and
//! `SSL://broker1.example.com:9093` outside. Without `listeners`, `--listen` is one
//! PLAINTEXT listener, as before.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::config::{BrokerConfig, ConfigError, Origin};
use crate::settings;

/// How a listener's connections are secured (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(text: &str) -> Option<SecurityProtocol> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// One listener to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Upper case, as Kafka normalises listener names.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
}

/// One `NAME://host:port` entry of `listeners` or `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    host: String,
    port: u16,
}

fn invalid(setting: &str, value: &str, reason: String, origin: &Origin) -> ConfigError {
    ConfigError::Invalid {
        name: setting.to_string(),
        value: value.to_string(),
        reason,
        origin: origin.clone(),
    }
}

/// Parses `NAME://host:port,...`. An entry without `NAME://` is `PLAINTEXT` (what
/// tidelog's one-listener `advertised.listeners` accepted). An empty host is kept
/// empty (Kafka's "the default interface").
fn parse_entries(setting: &str, value: &str, origin: &Origin) -> Result<Vec<Entry>, ConfigError> {
    let bad = |reason: &str| invalid(setting, value, reason.to_string(), origin);
    let mut entries: Vec<Entry> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = match entry.split_once("://") {
            Some((name, address)) => (name.trim().to_ascii_uppercase(), address),
            None => ("PLAINTEXT".to_string(), entry),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(
                "a listener name is letters, digits and _ (e.g. SSL://host:9093)",
            ));
        }
        let Some((host, port)) = address.rsplit_once(':') else {
            return Err(bad("expected NAME://host:port"));
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if entries.iter().any(|e| e.name == name) {
            return Err(invalid(
                setting,
                value,
                format!("listener {name} is named twice"),
                origin,
            ));
        }
        entries.push(Entry {
            name,
            host: host.to_string(),
            port,
        });
    }
    if entries.is_empty() {
        return Err(bad("expected NAME://host:port"));
    }
    Ok(entries)
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
fn parse_protocol_map(
    value: &str,
    origin: &Origin,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let setting = settings::LISTENER_SECURITY_PROTOCOL_MAP.name;
    let mut map = BTreeMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, protocol)) = pair.split_once(':') else {
            return Err(invalid(
                setting,
                value,
                format!("`{pair}` is not NAME:PROTOCOL"),
                origin,
            ));
        };
        let Some(protocol) = SecurityProtocol::parse(protocol) else {
            return Err(invalid(
                setting,
                value,
                format!(
                    "`{}` is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
                    protocol.trim()
                ),
                origin,
            ));
        };
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

impl BrokerConfig {
    /// The listeners to bind: `listeners` if set, else `--listen` as one PLAINTEXT
    /// listener. Every name must be in the protocol map.
    pub fn listener_specs(&self) -> Result<Vec<ListenerSpec>, ConfigError> {
        let setting = settings::LISTENERS.name;
        let value = self.get(settings::LISTENERS);
        if value.trim().is_empty() {
            return Ok(vec![ListenerSpec {
                name: "PLAINTEXT".to_string(),
                protocol: SecurityProtocol::Plaintext,
                bind: self.listen,
            }]);
        }
        let origin = self.origin(setting);
        let map_origin = self.origin(settings::LISTENER_SECURITY_PROTOCOL_MAP.name);
        let map = parse_protocol_map(
            &self.get(settings::LISTENER_SECURITY_PROTOCOL_MAP),
            &map_origin,
        )?;
        let mut specs = Vec::new();
        for entry in parse_entries(setting, &value, &origin)? {
            let Some(&protocol) = map.get(&entry.name) else {
                return Err(invalid(
                    setting,
                    &value,
                    format!(
                        "listener {} is not in listener.security.protocol.map",
                        entry.name
                    ),
                    &origin,
                ));
            };
            // An empty host binds every interface, as in Kafka; `localhost` is the
            // loopback address (other names are not resolved: binding must not wait
            // on DNS).
            let host = match entry.host.as_str() {
                "" => "0.0.0.0",
                "localhost" => "127.0.0.1",
                host => host,
            };
            let bind = format!("{}:{}", bracket(host), entry.port)
                .parse::<SocketAddr>()
                .map_err(|_| {
                    invalid(
                        setting,
                        &value,
                        format!(
                            "listener {}: `{host}` is not an IP address to bind",
                            entry.name
                        ),
                        &origin,
                    )
                })?;
            specs.push(ListenerSpec {
                name: entry.name,
                protocol,
                bind,
            });
        }
        Ok(specs)
    }

    /// The controller quorum's listener (`controller.listener.names`, its first name:
    /// the one voters listen on and every node connects to) and its protocol from
    /// `listener.security.protocol.map`; unmapped, PLAINTEXT, as Kafka maps controller
    /// listeners when the map does not name them. `None`: no name is configured (the
    /// `--controller-listen` port speaks PLAINTEXT).
    pub fn controller_listener(&self) -> Result<Option<(String, SecurityProtocol)>, ConfigError> {
        let Some((names, _)) = self.process_setting("controller.listener.names") else {
            return Ok(None);
        };
        let Some(name) = names
            .split(',')
            .map(str::trim)
            .find(|n| !n.is_empty())
            .map(str::to_ascii_uppercase)
        else {
            return Ok(None);
        };
        let map_origin = self.origin(settings::LISTENER_SECURITY_PROTOCOL_MAP.name);
        let map = parse_protocol_map(
            &self.get(settings::LISTENER_SECURITY_PROTOCOL_MAP),
            &map_origin,
        )?;
        let protocol = map
            .get(&name)
            .copied()
            .or_else(|| SecurityProtocol::parse(&name))
            .unwrap_or(SecurityProtocol::Plaintext);
        Ok(Some((name, protocol)))
    }

    /// The listener other brokers connect to: `inter.broker.listener.name`, or the
    /// listener named after `security.inter.broker.protocol` (only one of the two may
    /// be set, as in Kafka), else the one named PLAINTEXT, else (a node with one
    /// listener, or a cluster of one, which has no other brokers) the first. Brokers
    /// connect to it with its protocol (`net::outbound`).
    pub fn inter_broker_listener(
        &self,
        specs: &[ListenerSpec],
        in_cluster: bool,
    ) -> Result<String, ConfigError> {
        let setting = settings::INTER_BROKER_LISTENER_NAME;
        let by_protocol = settings::SECURITY_INTER_BROKER_PROTOCOL;
        let named = self.get(setting).trim().to_ascii_uppercase();
        let protocol = self.get(by_protocol).trim().to_ascii_uppercase();
        let bad =
            |reason: String| invalid(setting.name, &named, reason, &self.origin(setting.name));
        if !named.is_empty() && !protocol.is_empty() {
            return Err(bad(format!(
                "only one of {} and {} may be set",
                setting.name, by_protocol.name
            )));
        }
        let spec = if !protocol.is_empty() {
            specs.iter().find(|s| s.name == protocol).ok_or_else(|| {
                invalid(
                    by_protocol.name,
                    &protocol,
                    format!("no listener is named {protocol}"),
                    &self.origin(by_protocol.name),
                )
            })?
        } else if named.is_empty() {
            specs
                .iter()
                .find(|s| s.name == "PLAINTEXT")
                .or(if specs.len() == 1 || !in_cluster {
                    specs.first()
                } else {
                    None
                })
                .ok_or_else(|| {
                    bad("there is no PLAINTEXT listener: name the listener brokers use".into())
                })?
        } else {
            specs
                .iter()
                .find(|s| s.name == named)
                .ok_or_else(|| bad(format!("{named} is not one of the listeners")))?
        };
        Ok(spec.name.clone())
    }

    /// What clients are told to connect to, one `(name, host, port)` per listener,
    /// given the ports the listeners bound (`bound`, in `specs` order). From
    /// `advertised.listeners` when set (each name one of the listeners), else each
    /// listener's own host (or `advertised.host`) with its bound port. An address on
    /// every interface (`0.0.0.0`, `::`) is refused: clients cannot connect to it.
    pub fn advertised_endpoints(
        &self,
        specs: &[ListenerSpec],
        bound: &[u16],
    ) -> Result<Vec<(String, String, u16)>, ConfigError> {
        let setting = settings::ADVERTISED_LISTENERS.name;
        let value = self.get(settings::ADVERTISED_LISTENERS);
        if !value.trim().is_empty() {
            let origin = self.origin(setting);
            let mut out = Vec::new();
            for entry in parse_entries(setting, &value, &origin)? {
                let reason = if !specs.iter().any(|s| s.name == entry.name) {
                    Some(format!("{} is not one of the listeners", entry.name))
                } else if entry.host.is_empty() || entry.port == 0 {
                    Some("expected NAME://host:port".to_string())
                } else if unspecified(&entry.host) {
                    Some("clients cannot connect to an unspecified address".to_string())
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(invalid(setting, &value, reason, &origin));
                }
                out.push((entry.name, entry.host, entry.port));
            }
            return Ok(out);
        }
        let advertised_host = self.get(settings::ADVERTISED_HOST);
        let mut out = Vec::new();
        for (spec, port) in specs.iter().zip(bound) {
            let host = if !advertised_host.is_empty() {
                advertised_host.clone()
            } else if spec.bind.ip().is_unspecified() {
                return Err(ConfigError::Unadvertised(spec.bind.to_string()));
            } else {
                spec.bind.ip().to_string()
            };
            out.push((spec.name.clone(), host, *port));
        }
        Ok(out)
    }
}

fn unspecified(host: &str) -> bool {
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}

/// An IPv6 address in brackets, so it parses as `[addr]:port`.
fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn config(listen: &str) -> BrokerConfig {
        let addr: SocketAddr = listen.parse().unwrap();
        BrokerConfig::new(1, addr, addr, PathBuf::from("/tmp/x"))
    }

    fn ports(specs: &[ListenerSpec]) -> Vec<u16> {
        specs.iter().map(|s| s.bind.port()).collect()
    }

    #[test]
    fn listen_alone_is_one_plaintext_listener() {
        let c = config("127.0.0.1:9092");
        let specs = c.listener_specs().unwrap();
        assert_eq!(
            specs,
            [ListenerSpec {
                name: "PLAINTEXT".into(),
                protocol: SecurityProtocol::Plaintext,
                bind: "127.0.0.1:9092".parse().unwrap(),
            }]
        );
        assert_eq!(c.inter_broker_listener(&specs, true).unwrap(), "PLAINTEXT");
        assert_eq!(
            c.advertised_endpoints(&specs, &[9092]).unwrap(),
            [("PLAINTEXT".into(), "127.0.0.1".into(), 9092)]
        );
    }

    #[test]
    fn several_listeners_with_the_default_protocol_map() {
        let mut c = config("127.0.0.1:9092");
        c.set(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092, ssl://[::1]:9093,EXTERNAL://:9094",
        )
        .unwrap();
        c.set(
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,EXTERNAL:SSL",
        )
        .unwrap();
        let specs = c.listener_specs().unwrap();
        let names: Vec<_> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.protocol))
            .collect();
        assert_eq!(
            names,
            [
                ("PLAINTEXT", SecurityProtocol::Plaintext),
                ("SSL", SecurityProtocol::Ssl),
                ("EXTERNAL", SecurityProtocol::Ssl)
            ]
        );
        assert_eq!(specs[1].bind, "[::1]:9093".parse().unwrap());
        assert_eq!(specs[2].bind, "0.0.0.0:9094".parse().unwrap());
        // EXTERNAL binds every interface: it needs an advertised address.
        assert!(c.advertised_endpoints(&specs, &ports(&specs)).is_err());
        c.set(
            "advertised.listeners",
            "PLAINTEXT://127.0.0.1:9092,EXTERNAL://broker1.example.com:19094",
        )
        .unwrap();
        assert_eq!(
            c.advertised_endpoints(&specs, &ports(&specs)).unwrap(),
            [
                ("PLAINTEXT".into(), "127.0.0.1".into(), 9092),
                ("EXTERNAL".into(), "broker1.example.com".into(), 19094)
            ]
        );
        c.set("inter.broker.listener.name", "ssl").unwrap();
        assert_eq!(c.inter_broker_listener(&specs, false).unwrap(), "SSL");
        assert_eq!(c.inter_broker_listener(&specs, true).unwrap(), "SSL");
        c.set("security.inter.broker.protocol", "SSL").unwrap();
        let both = c
            .inter_broker_listener(&specs, true)
            .unwrap_err()
            .to_string();
        assert!(both.contains("only one of"), "{both}");
        c.set("inter.broker.listener.name", "").unwrap();
        assert_eq!(c.inter_broker_listener(&specs, true).unwrap(), "SSL");
        c.set("security.inter.broker.protocol", "SASL_SSL").unwrap();
        assert!(c.inter_broker_listener(&specs, true).is_err());
        c.set("security.inter.broker.protocol", "").unwrap();
        c.set("inter.broker.listener.name", "OTHER").unwrap();
        assert!(c.inter_broker_listener(&specs, false).is_err());
        let mut c = config("127.0.0.1:9092");
        c.set(
            "listeners",
            "SSL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9094",
        )
        .unwrap();
        c.set("listener.security.protocol.map", "SSL:SSL,EXTERNAL:SSL")
            .unwrap();
        let specs = c.listener_specs().unwrap();
        assert_eq!(c.inter_broker_listener(&specs, false).unwrap(), "SSL");
        // Two listeners, none PLAINTEXT: a cluster must be told which one brokers use.
        assert!(c.inter_broker_listener(&specs, true).is_err());
    }

    #[test]
    fn sasl_listeners_are_parsed() {
        let mut c = config("127.0.0.1:9092");
        c.set("listeners", "SASL_SSL://127.0.0.1:9093").unwrap();
        let specs = c.listener_specs().unwrap();
        assert_eq!(specs[0].protocol, SecurityProtocol::SaslSsl);
        c.set("listeners", "INTERNAL://127.0.0.1:9093").unwrap();
        c.set("listener.security.protocol.map", "INTERNAL:SASL_PLAINTEXT")
            .unwrap();
        let specs = c.listener_specs().unwrap();
        assert_eq!(specs[0].protocol, SecurityProtocol::SaslPlaintext);
    }

    #[test]
    fn the_controller_listener_and_its_protocol() {
        let mut c = config("127.0.0.1:9092");
        assert_eq!(c.controller_listener().unwrap(), None);
        c.set("controller.listener.names", "controller,OTHER")
            .unwrap();
        assert_eq!(
            c.controller_listener().unwrap(),
            Some(("CONTROLLER".to_string(), SecurityProtocol::Plaintext))
        );
        c.set(
            "listener.security.protocol.map",
            "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT",
        )
        .unwrap();
        assert_eq!(
            c.controller_listener().unwrap(),
            Some(("CONTROLLER".to_string(), SecurityProtocol::SaslSsl))
        );
        c.set("controller.listener.names", "SSL").unwrap();
        assert_eq!(
            c.controller_listener().unwrap(),
            Some(("SSL".to_string(), SecurityProtocol::Ssl))
        );
    }

    #[test]
    fn bad_listener_values_are_refused() {
        for bad in [
            "CUSTOM://127.0.0.1:1",
            "PLAINTEXT://127.0.0.1",
            "PLAINTEXT://host.example.com:1",
            "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
            "PLAINTEXT://127.0.0.1:x",
            "://127.0.0.1:1",
        ] {
            let mut c = config("127.0.0.1:9092");
            c.set("listeners", bad).unwrap();
            assert!(c.listener_specs().is_err(), "{bad}");
        }
        let mut c = config("127.0.0.1:9092");
        c.set("listener.security.protocol.map", "PLAINTEXT:TLS")
            .unwrap();
        c.set("listeners", "PLAINTEXT://127.0.0.1:1").unwrap();
        assert!(c.listener_specs().is_err());
    }

    #[test]
    fn advertised_listeners_name_listeners_and_reachable_addresses() {
        let any: SocketAddr = "0.0.0.0:9092".parse().unwrap();
        let mut c = BrokerConfig::new(1, any, any, PathBuf::from("/tmp/x"));
        let specs = c.listener_specs().unwrap();
        let refused = c
            .advertised_endpoints(&specs, &[9092])
            .unwrap_err()
            .to_string();
        assert!(refused.contains("advertised.listeners"), "{refused}");
        c.set("advertised.listeners", "PLAINTEXT://broker1:19092")
            .unwrap();
        assert_eq!(
            c.advertised_endpoints(&specs, &[9092]).unwrap(),
            [("PLAINTEXT".into(), "broker1".into(), 19092)]
        );
        c.set("advertised.listeners", "[::1]:9000").unwrap();
        assert_eq!(
            c.advertised_endpoints(&specs, &[9092]).unwrap(),
            [("PLAINTEXT".into(), "::1".into(), 9000)]
        );
        for bad in [
            "PLAINTEXT://0.0.0.0:9092",
            "SSL://h:1",
            "h",
            "a://h:1,b://h:2",
        ] {
            c.set("advertised.listeners", bad).unwrap();
            assert!(c.advertised_endpoints(&specs, &[9092]).is_err(), "{bad}");
        }
        let mut c = BrokerConfig::new(1, any, any, PathBuf::from("/tmp/x"));
        c.set("advertised.host", "broker1").unwrap();
        assert_eq!(
            c.advertised_endpoints(&specs, &[9093]).unwrap(),
            [("PLAINTEXT".into(), "broker1".into(), 9093)]
        );
    }
}
