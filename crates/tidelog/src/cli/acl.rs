//! `tidelog acl add|list|remove`: ACLs with kafka-acls' options, through the client
//! library (CreateAcls, DescribeAcls, DeleteAcls).

use std::io::Write as _;

use anyhow::{bail, Context};
use tidelog_client::{AclBinding, AclCode, AclFilter};

use super::ConnectArgs;

/// The one CLUSTER resource's name.
const CLUSTER_NAME: &str = "kafka-cluster";

#[derive(clap::Args)]
pub(crate) struct AclArgs {
    #[command(subcommand)]
    command: AclCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum AclCommand {
    /// Add ACLs: each principal given × each operation, on the resource.
    Add {
        #[command(flatten)]
        who: Principals,
        #[command(flatten)]
        resource: Resource,
    },
    /// List the ACLs (on the resource given, or all).
    List {
        #[command(flatten)]
        resource: Resource,
        /// Only this principal's ACLs.
        #[arg(long)]
        principal: Option<String>,
    },
    /// Remove ACLs matching the options (principals, operations, host, resource);
    /// what is not given matches everything.
    Remove {
        #[command(flatten)]
        who: Principals,
        #[command(flatten)]
        resource: Resource,
    },
}

#[derive(clap::Args)]
struct Principals {
    /// Principal to allow (`User:alice`, `User:*`); repeatable.
    #[arg(long)]
    allow_principal: Vec<String>,
    /// Principal to deny; repeatable.
    #[arg(long)]
    deny_principal: Vec<String>,
    /// Operation (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, All); repeatable.
    #[arg(long)]
    operation: Vec<String>,
    /// The client address the ACL applies to (default `*`, every host).
    #[arg(long)]
    host: Option<String>,
}

#[derive(clap::Args)]
struct Resource {
    /// A topic (`*` for every topic).
    #[arg(long, conflicts_with_all = ["group", "cluster", "transactional_id"])]
    topic: Option<String>,
    /// A consumer group.
    #[arg(long, conflicts_with_all = ["cluster", "transactional_id"])]
    group: Option<String>,
    /// The cluster.
    #[arg(long, conflicts_with = "transactional_id")]
    cluster: bool,
    /// A transactional id.
    #[arg(long)]
    transactional_id: Option<String>,
    /// literal or prefixed (add); also any or match (list, remove).
    #[arg(long, default_value = "literal")]
    resource_pattern_type: String,
}

impl Resource {
    /// (resource type code, name), `None` when no resource was named.
    fn named(&self) -> Option<(i8, String)> {
        let by = |kind: &str, name: &str| {
            AclCode::resource_type(kind).map(|code| (code, name.to_owned()))
        };
        if let Some(t) = &self.topic {
            by("TOPIC", t)
        } else if let Some(g) = &self.group {
            by("GROUP", g)
        } else if self.cluster {
            by("CLUSTER", CLUSTER_NAME)
        } else if let Some(t) = &self.transactional_id {
            by("TRANSACTIONAL_ID", t)
        } else {
            None
        }
    }

    fn pattern_type(&self) -> anyhow::Result<i8> {
        AclCode::pattern_type(&self.resource_pattern_type).with_context(|| {
            format!(
                "unknown --resource-pattern-type {}",
                self.resource_pattern_type
            )
        })
    }

    fn filter(&self) -> anyhow::Result<AclFilter> {
        let (resource_type, resource_name) = match self.named() {
            Some((t, n)) => (t, Some(n)),
            None => (1, None),
        };
        let pattern_type = match self.named() {
            Some(_) => self.pattern_type()?,
            None => 1,
        };
        Ok(AclFilter {
            resource_type,
            resource_name,
            pattern_type,
            principal: None,
            host: None,
            operation: 1,
            permission: 1,
        })
    }
}

fn operations(names: &[String]) -> anyhow::Result<Vec<i8>> {
    names
        .iter()
        .map(|n| AclCode::operation(n).with_context(|| format!("unknown --operation {n}")))
        .collect()
}

fn entries(who: &Principals) -> impl Iterator<Item = (i8, &String)> {
    let allow = AclCode::permission("ALLOW").unwrap_or(3);
    let deny = AclCode::permission("DENY").unwrap_or(2);
    who.allow_principal
        .iter()
        .map(move |p| (allow, p))
        .chain(who.deny_principal.iter().map(move |p| (deny, p)))
}

pub(crate) fn run(args: AclArgs) -> anyhow::Result<()> {
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            AclCommand::Add { who, resource } => {
                let Some((resource_type, resource_name)) = resource.named() else {
                    bail!("name a resource: --topic, --group, --cluster or --transactional-id");
                };
                let ops = operations(&who.operation)?;
                if ops.is_empty()
                    || (who.allow_principal.is_empty() && who.deny_principal.is_empty())
                {
                    bail!("give --operation and --allow-principal or --deny-principal");
                }
                let pattern_type = resource.pattern_type()?;
                let mut acls = Vec::new();
                for (permission, principal) in entries(&who) {
                    for op in &ops {
                        acls.push(AclBinding {
                            resource_type,
                            resource_name: resource_name.clone(),
                            pattern_type,
                            principal: principal.clone(),
                            host: who.host.clone().unwrap_or_else(|| "*".to_owned()),
                            operation: *op,
                            permission,
                        });
                    }
                }
                client.create_acls(&acls).await?;
                print_acls("added", &acls)
            }
            AclCommand::List {
                resource,
                principal,
            } => {
                let mut filter = resource.filter()?;
                filter.principal = principal;
                let mut acls = client.describe_acls(&filter).await?;
                acls.sort();
                print_acls("", &acls)
            }
            AclCommand::Remove { who, resource } => {
                let base = resource.filter()?;
                let ops = operations(&who.operation)?;
                let ops = if ops.is_empty() { vec![1] } else { ops };
                let mut filters = Vec::new();
                let principals: Vec<(i8, Option<&String>)> =
                    if who.allow_principal.is_empty() && who.deny_principal.is_empty() {
                        vec![(1, None)]
                    } else {
                        entries(&who).map(|(perm, p)| (perm, Some(p))).collect()
                    };
                for (permission, principal) in principals {
                    for op in &ops {
                        filters.push(AclFilter {
                            principal: principal.cloned(),
                            host: who.host.clone(),
                            operation: *op,
                            permission,
                            ..base.clone()
                        });
                    }
                }
                let mut removed = Vec::new();
                for filter in &filters {
                    removed.extend(client.delete_acls(filter).await?);
                }
                removed.sort();
                removed.dedup();
                print_acls("removed", &removed)
            }
        }
    })
}

fn print_acls(verb: &str, acls: &[AclBinding]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for a in acls {
        let line = format!(
            "{}{} {} {} on {}:{}:{} from {}",
            if verb.is_empty() {
                String::new()
            } else {
                format!("{verb} ")
            },
            AclCode::permission_name(a.permission),
            a.principal,
            AclCode::operation_name(a.operation),
            AclCode::resource_type_name(a.resource_type),
            AclCode::pattern_type_name(a.pattern_type),
            a.resource_name,
            a.host,
        );
        writeln!(out, "{line}")?;
    }
    Ok(())
}
