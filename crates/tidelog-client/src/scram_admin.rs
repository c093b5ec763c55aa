//! SCRAM credentials: AlterUserScramCredentials and DescribeUserScramCredentials, as
//! Kafka's admin client sends them. The salt and the salted password are made here,
//! so the password itself never leaves the client.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_sasl::scram::{random_bytes, ScramMechanism, SALT_BYTES};

use crate::client::Client;
use crate::cluster::retrying;
use crate::error::{ClientError, Result};

/// One credential of a user as DescribeUserScramCredentials reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredentialInfo {
    /// `None` for a mechanism type this client does not know.
    pub mechanism: Option<ScramMechanism>,
    pub iterations: i32,
}

/// A user and its SCRAM credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserScramCredentials {
    pub user: String,
    pub credentials: Vec<ScramCredentialInfo>,
}

/// Each call is retried while it fails with a retriable error within the client's API
/// timeout. A delete retried after a lost answer may find the credential already gone.
impl Client {
    /// Every user with a SCRAM credential, or only `users` (an unknown one is an error).
    pub async fn describe_user_scram_credentials(
        &mut self,
        users: Option<&[String]>,
    ) -> Result<Vec<UserScramCredentials>> {
        retrying!(self, self.describe_user_scram_credentials_once(users).await)
    }

    async fn describe_user_scram_credentials_once(
        &mut self,
        users: Option<&[String]>,
    ) -> Result<Vec<UserScramCredentials>> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|name| UserName::default().with_name(StrBytes::from_string(name.clone())))
                .collect()
        }));
        let response = self.send_any(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "describe SCRAM credentials".to_string(),
        )?;
        let mut out = Vec::with_capacity(response.results.len());
        for result in response.results {
            let user = result.user.to_string();
            ClientError::check(
                result.error_code,
                result.error_message.as_ref().map(StrBytes::as_str),
                || format!("describe SCRAM credentials of user {user}"),
            )?;
            let credentials = result
                .credential_infos
                .iter()
                .map(|c| ScramCredentialInfo {
                    mechanism: ScramMechanism::from_type_id(c.mechanism),
                    iterations: c.iterations,
                })
                .collect();
            out.push(UserScramCredentials { user, credentials });
        }
        Ok(out)
    }

    /// Sets (or replaces) `user`'s credential for `mechanism`.
    pub async fn upsert_user_scram_credential(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        iterations: u32,
        password: &str,
    ) -> Result<()> {
        let salt = random_bytes(SALT_BYTES);
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism.type_id())
            .with_iterations(i32::try_from(iterations).unwrap_or(i32::MAX))
            .with_salt(salt.into())
            .with_salted_password(salted.into());
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
        self.alter_scram(request, user, "set").await
    }

    /// Deletes `user`'s credential for `mechanism`.
    pub async fn delete_user_scram_credential(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Result<()> {
        let deletion = ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism.type_id());
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]);
        self.alter_scram(request, user, "delete").await
    }

    async fn alter_scram(
        &mut self,
        request: AlterUserScramCredentialsRequest,
        user: &str,
        what: &str,
    ) -> Result<()> {
        retrying!(self, self.alter_scram_once(&request, user, what).await)
    }

    async fn alter_scram_once(
        &mut self,
        request: &AlterUserScramCredentialsRequest,
        user: &str,
        what: &str,
    ) -> Result<()> {
        let response = self.send_controller(request).await?;
        let result = response
            .results
            .into_iter()
            .find(|r| r.user.as_str() == user)
            .ok_or_else(|| {
                ClientError::Protocol("AlterUserScramCredentials answered no result".into())
            })?;
        ClientError::check(
            result.error_code,
            result.error_message.as_ref().map(StrBytes::as_str),
            || format!("{what} SCRAM credential of user {user}"),
        )
    }
}
