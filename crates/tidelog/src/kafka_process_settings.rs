//! The Kafka broker settings that are `tidelog serve` flags, so a Kafka
//! `server.properties` starts a node: `node.id` (or `broker.id`) for --node-id,
//! `log.dirs` / `log.dir` for --data-dir (its first entry; further entries are more
//! log directories for partitions), the controller listener of `listeners` (named
//! by `controller.listener.names`) for --controller-listen,
//! `controller.quorum.voters` for --quorum and `process.roles` for --roles. A flag given
//! on the command line or through its environment variable wins over the file.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use anyhow::{bail, Context};
use tidelog_broker::{settings, BrokerConfig};

/// The cluster flags of `tidelog serve` a file may fill in.
pub(crate) struct ProcessFlags<'a> {
    pub(crate) quorum: &'a mut Option<String>,
    pub(crate) controller_listen: &'a mut Option<String>,
    pub(crate) roles: &'a mut Vec<String>,
}

/// Whether `flag` was given on the command line (as `--flag value` or `--flag=value`).
pub(crate) fn on_command_line(flag: &str) -> bool {
    std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// Whether `flag` was given on the command line or through its variable `env`, rather
/// than left at its default.
pub(crate) fn explicit(flag: &str, env: &str) -> bool {
    on_command_line(flag) || std::env::var_os(env).is_some()
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Fills `config`'s node id and data dir and the cluster `flags` from
/// the Kafka names the file gave, where no flag did.
pub(crate) fn apply(config: &mut BrokerConfig, flags: &mut ProcessFlags<'_>) -> anyhow::Result<()> {
    // Read before `config` is changed below: value and origin of each name the file gave.
    let read = |name: &str| {
        config
            .process_setting(name)
            .map(|(v, o)| (v.to_owned(), o.to_string()))
    };
    let (node, broker) = (read("node.id"), read("broker.id"));
    let log_dirs = read("log.dirs").or_else(|| read("log.dir"));
    let controller_listener_names = read("controller.listener.names");
    let voters = read("controller.quorum.voters");
    let roles = read("process.roles");
    let bootstrap_servers = read("controller.quorum.bootstrap.servers");
    if let Some((id, origin)) = node_id(&node, &broker)? {
        if !explicit("--node-id", "TIDELOG_NODE_ID") {
            config.node_id = id
                .parse::<u16>()
                .map(i32::from)
                .with_context(|| format!("node.id {origin}: {id:?} is not a node id (0-65535)"))?;
        }
    }
    if let Some((dirs, origin)) = log_dirs {
        let dirs = list(&dirs);
        let Some((first, rest)) = dirs.split_first() else {
            bail!("log.dirs {origin} is empty: give the node's data directory");
        };
        // An explicit --data-dir stands in for the first directory (the one holding
        // the metadata); the others hold partitions either way.
        if !explicit("--data-dir", "TIDELOG_DATA_DIR") {
            config.data_dir = PathBuf::from(first);
        }
        let mut extra: Vec<PathBuf> = Vec::new();
        for dir in rest.iter().map(PathBuf::from) {
            if dir == config.data_dir || extra.contains(&dir) {
                bail!("log.dirs {origin} lists {} twice", dir.display());
            }
            extra.push(dir);
        }
        config.extra_log_dirs = extra;
    }
    let controller_names: Vec<String> = controller_listener_names
        .map(|(v, _)| {
            list(&v)
                .into_iter()
                .map(|n| n.to_ascii_uppercase())
                .collect()
        })
        .unwrap_or_default();
    drop_controller_listeners(config, settings::ADVERTISED_LISTENERS, &controller_names)?;
    let controller_addr =
        match drop_controller_listeners(config, settings::LISTENERS, &controller_names)? {
            Some(entry) => Some(
                listener(&entry)
                    .with_context(|| {
                        format!("listeners {}", config.origin(settings::LISTENERS.name))
                    })?
                    .1,
            ),
            None => None,
        };
    if let Some((voters, _)) = &voters {
        if !explicit("--quorum", "TIDELOG_QUORUM") {
            *flags.quorum = Some(voters.clone());
        }
    }
    let roles = roles.map(|(v, o)| (list(&v), o));
    if flags.quorum.is_none() {
        // A cluster of one runs broker and controller; a bootstrap list naming only this
        // node's own controller listener is what Kafka's single-node file gives.
        if let Some((roles, origin)) = &roles {
            let both =
                roles.iter().any(|r| r == "broker") && roles.iter().any(|r| r == "controller");
            if !both {
                bail!("process.roles {origin} is {:?}: without controller.quorum.voters a node is a cluster of one and runs both broker and controller", roles.join(","));
            }
        }
        if let Some((servers, origin)) = bootstrap_servers {
            let own_port = controller_addr.map(|a: SocketAddr| a.port());
            let servers = list(&servers);
            let only_self = matches!(&servers[..], [one] if one.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()) == own_port);
            if !only_self {
                bail!("controller.quorum.bootstrap.servers {origin}: tidelog's controller quorum has a fixed set of voters; set controller.quorum.voters=id@host:port,... (the same on every node)");
            }
        }
        return Ok(());
    }
    if let Some((roles, _)) = roles {
        if !explicit("--roles", "TIDELOG_ROLES") {
            *flags.roles = roles;
        }
    }
    let runs_controller = flags.roles.is_empty() || flags.roles.iter().any(|r| r == "controller");
    if let (Some(addr), true) = (controller_addr, runs_controller) {
        if flags.controller_listen.is_none() {
            *flags.controller_listen = Some(addr.to_string());
        }
    }
    Ok(())
}

/// Controller listeners are the controller quorum's, not the Kafka protocol's: Kafka's
/// files list them in `listeners` and `advertised.listeners` beside the client ones, so
/// those entries are taken out of `setting`; the (last) one taken out is returned.
fn drop_controller_listeners(
    config: &mut BrokerConfig,
    setting: settings::Setting<String>,
    controller_names: &[String],
) -> anyhow::Result<Option<String>> {
    let value = config.get(setting);
    let (mut kept, mut dropped) = (Vec::new(), None);
    for entry in list(&value) {
        let name = entry.split_once("://").map_or("", |(n, _)| n);
        if controller_names
            .iter()
            .any(|c| c.eq_ignore_ascii_case(name))
        {
            dropped = Some(entry);
        } else {
            kept.push(entry);
        }
    }
    if dropped.is_some() {
        let origin = config.origin(setting.name);
        if kept.is_empty() {
            bail!(
                "{} {origin} has only controller listeners: add a client listener",
                setting.name
            );
        }
        config.set_from(setting.name, &kept.join(","), origin)?;
    }
    Ok(dropped)
}

/// `node.id`, or `broker.id` (its Kafka synonym); both given must agree.
fn node_id(
    node: &Option<(String, String)>,
    broker: &Option<(String, String)>,
) -> anyhow::Result<Option<(String, String)>> {
    match (node, broker) {
        (Some(n), Some(b)) if n.0 != b.0 => {
            bail!(
                "node.id {} is {} but broker.id {} is {}",
                n.1,
                n.0,
                b.1,
                b.0
            )
        }
        (Some(n), _) => Ok(Some(n.clone())),
        (None, b) => Ok(b.clone()),
    }
}

/// One `NAME://host:port` of `listeners`; an empty host binds every interface, as in
/// Kafka, and a host name is resolved.
fn listener(entry: &str) -> anyhow::Result<(String, SocketAddr)> {
    let Some((name, address)) = entry.split_once("://") else {
        bail!("{entry:?} is not NAME://host:port");
    };
    let Some((host, port)) = address.rsplit_once(':') else {
        bail!("{entry:?} is not NAME://host:port");
    };
    let port: u16 = port
        .parse()
        .with_context(|| format!("{entry:?}: the port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    let addr = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("{entry:?}: cannot resolve {host}"))?
        .next()
        .with_context(|| format!("{entry:?}: {host} has no address"))?;
    Ok((name.trim().to_ascii_uppercase(), addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_as_kafka_writes_them() {
        assert_eq!(
            listener("PLAINTEXT://:9092").unwrap(),
            ("PLAINTEXT".into(), "0.0.0.0:9092".parse().unwrap())
        );
        assert_eq!(
            listener("controller://127.0.0.1:9093").unwrap(),
            ("CONTROLLER".into(), "127.0.0.1:9093".parse().unwrap())
        );
        assert_eq!(listener("PLAINTEXT://[::1]:9092").unwrap().1.port(), 9092);
        assert!(listener("localhost:9092").is_err());
        assert!(listener("PLAINTEXT://h:x").is_err());
    }

    #[test]
    fn node_id_and_broker_id_must_agree() {
        let some = |v: &str| Some((v.to_string(), "in f".to_string()));
        assert_eq!(node_id(&some("2"), &None).unwrap(), some("2"));
        assert_eq!(node_id(&None, &some("3")).unwrap(), some("3"));
        assert!(node_id(&some("2"), &some("3")).is_err());
    }
}
