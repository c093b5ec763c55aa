//! AlterUserScramCredentials: the admin client sends salt and salted password; this
//! broker derives StoredKey and ServerKey and forwards the change to the controller,
//! which checks it as Kafka's does and writes the credential records. The salted
//! password goes no further than this handler.

use kafka_protocol::messages::alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_controller::acl::AclOperation;
use tidelog_controller::scram::ScramUpsertion;
use tidelog_protocol::ProtocolError;
use tidelog_sasl::scram::{ScramCredential, ScramMechanism};

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// How long the handler waits for this node's image to show the change, so a
/// client that authenticates right after its AlterUserScramCredentials finds it.
const IMAGE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterUserScramCredentialsRequest = req.decode()?;
    // ALTER on the cluster, else every user named is refused (as Kafka answers).
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Alter) {
        let mut users: Vec<String> = request
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(request.upsertions.iter().map(|u| u.name.to_string()))
            .collect();
        users.sort();
        users.dedup();
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user))
                    .with_error_code(code)
            })
            .collect();
        return req.respond(&AlterUserScramCredentialsResponse::default().with_results(results));
    }
    let deletions: Vec<(String, i8)> = request
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .collect();
    let upsertions: Vec<ScramUpsertion> = request
        .upsertions
        .iter()
        .map(|u| {
            // An unknown mechanism or an iteration count out of range is refused by
            // the controller; no keys are derived for it.
            let credential = ScramMechanism::from_type_id(u.mechanism).map(|m| {
                ScramCredential::from_salted_password(
                    m,
                    &u.salted_password,
                    u.salt.to_vec(),
                    u32::try_from(u.iterations).unwrap_or(0),
                )
            });
            let usable = !u.salted_password.is_empty() && !u.salt.is_empty();
            let (stored_key, server_key) = match credential {
                Some(c) if usable => (c.stored_key, c.server_key),
                _ => (Vec::new(), Vec::new()),
            };
            ScramUpsertion {
                name: u.name.to_string(),
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                stored_key,
                server_key,
            }
        })
        .collect();
    let expected: Vec<(String, i8, Option<Vec<u8>>)> = deletions
        .iter()
        .map(|(n, m)| (n.clone(), *m, None))
        .chain(
            upsertions
                .iter()
                .map(|u| (u.name.clone(), u.mechanism, Some(u.stored_key.clone()))),
        )
        .collect();
    let names: Vec<String> = expected.iter().map(|(n, _, _)| n.clone()).collect();
    let results = match ctx
        .metadata
        .controller()
        .alter_scram_credentials(deletions, upsertions)
        .await
    {
        Ok(results) => {
            let applied: Vec<&(String, i8, Option<Vec<u8>>)> = expected
                .iter()
                .filter(|(n, _, _)| results.iter().any(|(u, code, _)| u == n && *code == 0))
                .collect();
            ctx.metadata
                .wait_for(IMAGE_CATCH_UP, |image| {
                    applied.iter().all(|(name, mechanism, key)| {
                        let stored = image.scram_credential(name, *mechanism);
                        match key {
                            None => stored.is_none(),
                            Some(key) => stored.is_some_and(|c| &c.stored_key == key),
                        }
                    })
                })
                .await;
            results
                .into_iter()
                .map(|(user, code, message)| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user))
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect()
        }
        Err(e) => {
            let mut unique = names;
            unique.sort();
            unique.dedup();
            unique
                .into_iter()
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user))
                        .with_error_code(e.error_code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                })
                .collect()
        }
    };
    req.respond(&AlterUserScramCredentialsResponse::default().with_results(results))
}
