//! DescribeUserScramCredentials, answered from this node's metadata image as a Kafka
//! broker answers it from its metadata cache: the mechanisms and iteration counts of
//! the users asked for (all users when none are named), never a key or salt.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tidelog_controller::acl::AclOperation;
use tidelog_controller::scram::codes;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeUserScramCredentialsRequest = req.decode()?;
    // DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the request and
    // for each user named, as Kafka answers.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Describe) {
        let message = "Cluster authorization failed.";
        let results = request
            .users
            .iter()
            .flatten()
            .map(|u| error(&u.name, code, message))
            .collect();
        return req.respond(
            &DescribeUserScramCredentialsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_static_str(message)))
                .with_results(results),
        );
    }
    let image = ctx.metadata.image();
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for credential in image.scram_credentials() {
        by_user.entry(&credential.name).or_default().push(
            CredentialInfo::default()
                .with_mechanism(credential.mechanism)
                .with_iterations(credential.iterations),
        );
    }
    let found = |user: &str, infos: Vec<CredentialInfo>| {
        DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_string()))
            .with_error_message(None)
            .with_credential_infos(infos)
    };
    let results = match request.users.filter(|users| !users.is_empty()) {
        None => by_user
            .iter()
            .map(|(user, infos)| found(user, infos.clone()))
            .collect(),
        Some(users) => {
            let mut results = Vec::with_capacity(users.len());
            let mut seen: Vec<&str> = Vec::new();
            let names: Vec<String> = users.iter().map(|u| u.name.to_string()).collect();
            for name in &names {
                if seen.contains(&name.as_str()) {
                    continue;
                }
                seen.push(name);
                let twice = names.iter().filter(|n| *n == name).count() > 1;
                let result = if twice {
                    error(
                        name,
                        codes::DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice in a single request",
                    )
                } else {
                    match by_user.get(name.as_str()) {
                        Some(infos) => found(name, infos.clone()),
                        None => error(
                            name,
                            codes::RESOURCE_NOT_FOUND,
                            "Attempt to describe a user credential that does not exist",
                        ),
                    }
                };
                results.push(result);
            }
            results
        }
    };
    req.respond(
        &DescribeUserScramCredentialsResponse::default()
            .with_error_message(None)
            .with_results(results),
    )
}

fn error(user: &str, code: i16, message: &'static str) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_static_str(message)))
}
