//! `tidelog user`: SCRAM users (AlterUserScramCredentials and
//! DescribeUserScramCredentials, as Kafka's `kafka-configs --entity-type users`).
//! The salted password is computed here; the password does not leave this process.
//!
//! PLAIN users are not here: they live in the listener's JAAS config
//! (`listener.name.<l>.plain.sasl.jaas.config`), as in Kafka.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use tidelog_client::{ClientError, ResponseError, ScramMechanism};
use tidelog_controller::scram::{self, ScramUpsertion};
use tidelog_controller::scram_bootstrap;
use tidelog_sasl::scram::{random_bytes, ScramCredential, SALT_BYTES};

use super::output::{print_json, OutputArgs};
use super::ConnectArgs;

/// Kafka's default iteration count (kafka-configs) and its bounds.
const DEFAULT_ITERATIONS: u32 = 4096;

#[derive(clap::Args)]
pub(crate) struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(clap::Subcommand)]
enum UserCommand {
    /// Create a SCRAM user, or replace its password for that mechanism.
    Create {
        /// User name (the principal is User:NAME).
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512", value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
        /// The password (or set TIDELOG_USER_PASSWORD, which keeps it out of the
        /// process list).
        #[arg(long, env = "TIDELOG_USER_PASSWORD", hide_env_values = true)]
        password: String,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
        /// Write the credential into this data directory instead, before the node's
        /// first start (Kafka's `kafka-storage format --add-scram`): the first user of
        /// a cluster whose listeners all need SASL. The node applies it when it first
        /// registers, before it is ready.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<std::path::PathBuf>,
    },
    /// List SCRAM users with their mechanisms and iteration counts.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a SCRAM user's credential (every mechanism it has, or one).
    Delete {
        /// User name.
        name: String,
        /// Only this mechanism's credential.
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: Option<ScramMechanism>,
    },
}

fn parse_mechanism(text: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(text)
        .ok_or_else(|| format!("{text} is not SCRAM-SHA-256 or SCRAM-SHA-512"))
}

/// `user create --data-dir`: the credential goes into the data directory, not to a
/// broker.
fn create_in_data_dir(
    dir: &std::path::Path,
    name: &str,
    mechanism: ScramMechanism,
    password: &str,
    iterations: u32,
) -> anyhow::Result<()> {
    let bounds = scram::MIN_ITERATIONS..=scram::MAX_ITERATIONS;
    if !i32::try_from(iterations).is_ok_and(|i| bounds.contains(&i)) {
        bail!("--iterations {iterations} is outside 4096..=16384");
    }
    if name.is_empty() {
        bail!("the user name is empty");
    }
    let salt = random_bytes(SALT_BYTES);
    let credential = ScramCredential::from_password(mechanism, password, salt.clone(), iterations);
    let file = scram_bootstrap::add(
        dir,
        ScramUpsertion {
            name: name.to_string(),
            mechanism: mechanism.type_id(),
            iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
            salt,
            stored_key: credential.stored_key,
            server_key: credential.server_key,
        },
    )?;
    println!(
        "wrote {mechanism} credential of user {name} ({iterations} iterations) to {}; applied at the node's first start",
        file.display()
    );
    Ok(())
}

pub(crate) fn run(args: UserArgs) -> anyhow::Result<()> {
    if let UserCommand::Create {
        name,
        mechanism,
        password,
        iterations,
        data_dir: Some(dir),
    } = &args.command
    {
        if password.is_empty() {
            bail!("the password is empty");
        }
        return create_in_data_dir(dir, name, *mechanism, password, *iterations);
    }
    super::runtime()?.block_on(async move {
        let mut client = args.connect.connect().await?;
        match args.command {
            UserCommand::Create {
                name,
                mechanism,
                password,
                iterations,
                data_dir: _,
            } => {
                if password.is_empty() {
                    bail!("the password is empty");
                }
                client
                    .upsert_user_scram_credential(&name, mechanism, iterations, &password)
                    .await?;
                println!("set {mechanism} credential of user {name} ({iterations} iterations)");
            }
            UserCommand::List { output } => {
                let users = client.describe_user_scram_credentials(None).await?;
                if output.json() {
                    let users: Vec<_> = users
                        .iter()
                        .map(|u| {
                            let credentials: Vec<_> = u
                                .credentials
                                .iter()
                                .map(|c| json!({"mechanism": mechanism_name(c.mechanism), "iterations": c.iterations}))
                                .collect();
                            json!({"name": u.user, "credentials": credentials})
                        })
                        .collect();
                    return print_json(&json!({ "users": users }));
                }
                let mut out = std::io::stdout().lock();
                for user in &users {
                    for c in &user.credentials {
                        writeln!(
                            out,
                            "{}\t{}\titerations={}",
                            user.user,
                            mechanism_name(c.mechanism),
                            c.iterations
                        )?;
                    }
                }
            }
            UserCommand::Delete { name, mechanism } => {
                let mechanisms = match mechanism {
                    Some(m) => vec![m],
                    None => {
                        let found = client
                            .describe_user_scram_credentials(Some(std::slice::from_ref(&name)))
                            .await
                            .map_err(|e| not_found(e, &name))?;
                        found
                            .iter()
                            .flat_map(|u| u.credentials.iter().filter_map(|c| c.mechanism))
                            .collect()
                    }
                };
                for m in mechanisms {
                    client
                        .delete_user_scram_credential(&name, m)
                        .await
                        .with_context(|| format!("deleting user {name}"))?;
                    println!("deleted {m} credential of user {name}");
                }
            }
        }
        Ok(())
    })
}

fn mechanism_name(mechanism: Option<ScramMechanism>) -> &'static str {
    mechanism.map_or("UNKNOWN", ScramMechanism::name)
}

fn not_found(e: ClientError, name: &str) -> anyhow::Error {
    match e {
        ClientError::Broker {
            error: ResponseError::ResourceNotFound,
            ..
        } => anyhow::anyhow!("user {name} has no SCRAM credential"),
        e => e.into(),
    }
}
