//! SCRAM credentials in the metadata: Kafka's UserScramCredentialRecord and
//! RemoveUserScramCredentialRecord, their replay, and AlterUserScramCredentials
//! planned as Kafka's ScramControlManager plans it (same checks, codes, messages).
//!
//! Only what a server needs to verify a proof is stored: salt, StoredKey, ServerKey
//! and the iteration count. The keys are computed by the broker that took the
//! request (from the salted password the admin client sent), so the controller
//! holds no cryptography.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::image::MetadataImage;
use crate::ops::Plan;
use crate::record::MetadataRecord;

/// Kafka's SCRAM mechanism types (`ScramMechanism.type()`); 0 is UNKNOWN.
pub const SCRAM_SHA_256: i8 = 1;
pub const SCRAM_SHA_512: i8 = 2;
/// Kafka's bounds on the iteration count of both mechanisms.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

/// Kafka error codes of AlterUserScramCredentials results.
pub mod codes {
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    pub const RESOURCE_NOT_FOUND: i16 = 91;
    pub const DUPLICATE_RESOURCE: i16 = 92;
    pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
}

/// One stored credential (a user has at most one per mechanism).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredentialImage {
    pub name: String,
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredentialImage {
    // The keys stay out of logs: with the StoredKey and ServerKey one can pose as the
    // server to the user.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentialImage")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Credentials by `(user, mechanism)`.
pub(crate) type ScramCredentials = BTreeMap<(String, i8), ScramCredentialImage>;

/// An upsertion as the broker forwards it: keys already derived.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramUpsertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramUpsertion")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// One user's outcome: `(user, error code, error message)`.
pub type ScramResult = (String, i16, Option<String>);

impl MetadataImage {
    /// The credential of `user` for `mechanism`.
    pub fn scram_credential(&self, user: &str, mechanism: i8) -> Option<&ScramCredentialImage> {
        self.scram.get(&(user.to_string(), mechanism))
    }

    /// Every stored credential, by user then mechanism.
    pub fn scram_credentials(&self) -> impl Iterator<Item = &ScramCredentialImage> {
        self.scram.values()
    }

    pub(crate) fn replay_scram(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::ScramCredential(credential) => {
                self.scram.insert(
                    (credential.name.clone(), credential.mechanism),
                    credential.clone(),
                );
            }
            MetadataRecord::RemoveScramCredential { name, mechanism } => {
                self.scram.remove(&(name.clone(), *mechanism));
            }
            _ => {}
        }
    }
}

fn known_mechanism(mechanism: i8) -> bool {
    matches!(mechanism, SCRAM_SHA_256 | SCRAM_SHA_512)
}

fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<(), (i16, &'static str)> {
    if name.is_empty() {
        return Err((codes::UNACCEPTABLE_CREDENTIAL, "Username must not be empty"));
    }
    if !known_mechanism(mechanism) {
        return Err((codes::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"));
    }
    Ok(())
}

fn check_upsertion(upsertion: &ScramUpsertion) -> Result<(), (i16, &'static str)> {
    check_name_and_mechanism(&upsertion.name, upsertion.mechanism)?;
    if upsertion.iterations < MIN_ITERATIONS {
        return Err((codes::UNACCEPTABLE_CREDENTIAL, "Too few iterations"));
    }
    if upsertion.iterations > MAX_ITERATIONS {
        return Err((codes::UNACCEPTABLE_CREDENTIAL, "Too many iterations"));
    }
    if upsertion.salt.is_empty() || upsertion.stored_key.is_empty() {
        return Err((
            codes::UNACCEPTABLE_CREDENTIAL,
            "Empty salt or salted password",
        ));
    }
    Ok(())
}

const TWICE: &str = "A user credential cannot be altered twice in the same request";

/// AlterUserScramCredentials: deletions `(user, mechanism)` and upsertions, each user
/// at most once in the request; every valid change is applied together.
pub fn plan_alter_scram_credentials(
    image: &MetadataImage,
    deletions: &[(String, i8)],
    upsertions: &[ScramUpsertion],
) -> Plan<Vec<ScramResult>> {
    let mut deleting: BTreeMap<&str, i8> = BTreeMap::new();
    let mut upserting: BTreeMap<&str, &ScramUpsertion> = BTreeMap::new();
    let mut errors: BTreeMap<&str, (i16, &'static str)> = BTreeMap::new();
    for (name, mechanism) in deletions {
        let name = name.as_str();
        if errors.contains_key(name) {
            continue;
        }
        if deleting.remove(name).is_some() {
            errors.insert(name, (codes::DUPLICATE_RESOURCE, TWICE));
            continue;
        }
        let checked = check_name_and_mechanism(name, *mechanism).and_then(|()| {
            match image.scram_credential(name, *mechanism) {
                Some(_) => Ok(()),
                None => Err((
                    codes::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )),
            }
        });
        match checked {
            Ok(()) => {
                deleting.insert(name, *mechanism);
            }
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    for upsertion in upsertions {
        let name = upsertion.name.as_str();
        if errors.contains_key(name) {
            continue;
        }
        if deleting.remove(name).is_some() || upserting.remove(name).is_some() {
            errors.insert(name, (codes::DUPLICATE_RESOURCE, TWICE));
            continue;
        }
        let checked = check_upsertion(upsertion);
        match checked {
            Ok(()) => {
                upserting.insert(name, upsertion);
            }
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for (name, mechanism) in deleting {
        records.push(MetadataRecord::RemoveScramCredential {
            name: name.to_string(),
            mechanism,
        });
        results.push((name.to_string(), 0, None));
    }
    for (name, u) in upserting {
        records.push(MetadataRecord::ScramCredential(ScramCredentialImage {
            name: u.name.clone(),
            mechanism: u.mechanism,
            salt: u.salt.clone(),
            stored_key: u.stored_key.clone(),
            server_key: u.server_key.clone(),
            iterations: u.iterations,
        }));
        results.push((name.to_string(), 0, None));
    }
    for (name, (code, message)) in errors {
        results.push((name.to_string(), code, Some(message.to_string())));
    }
    Plan {
        records,
        response: results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: vec![1; 16],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
        }
    }

    fn apply(image: &mut MetadataImage, plan: &Plan<Vec<ScramResult>>) {
        for record in &plan.records {
            let next = image.last_offset().map_or(0, |o| o + 1);
            image.replay(next, record);
        }
    }

    fn code_of(results: &[ScramResult], user: &str) -> i16 {
        results
            .iter()
            .find(|(u, _, _)| u == user)
            .map_or(-100, |(_, c, _)| *c)
    }

    #[test]
    fn kafkas_checks_and_codes() {
        let mut image = MetadataImage::new("c");
        let plan = plan_alter_scram_credentials(
            &image,
            &[("ghost".into(), SCRAM_SHA_256)],
            &[
                upsert("alice", SCRAM_SHA_512, 8192),
                upsert("", SCRAM_SHA_256, 8192),
                upsert("bob", 0, 8192),
                upsert("carol", SCRAM_SHA_256, 4095),
                upsert("dave", SCRAM_SHA_256, 16385),
                upsert("erin", SCRAM_SHA_256, 4096),
                upsert("erin", SCRAM_SHA_512, 4096),
            ],
        );
        let r = &plan.response;
        assert_eq!(code_of(r, "alice"), 0);
        assert_eq!(code_of(r, "ghost"), codes::RESOURCE_NOT_FOUND);
        assert_eq!(code_of(r, ""), codes::UNACCEPTABLE_CREDENTIAL);
        assert_eq!(code_of(r, "bob"), codes::UNSUPPORTED_SASL_MECHANISM);
        assert_eq!(code_of(r, "carol"), codes::UNACCEPTABLE_CREDENTIAL);
        assert_eq!(code_of(r, "dave"), codes::UNACCEPTABLE_CREDENTIAL);
        assert_eq!(code_of(r, "erin"), codes::DUPLICATE_RESOURCE);
        assert_eq!(r.len(), 7);
        assert_eq!(plan.records.len(), 1);
        apply(&mut image, &plan);
        let stored = image.scram_credential("alice", SCRAM_SHA_512).unwrap();
        assert_eq!(stored.iterations, 8192);
        assert!(image.scram_credential("alice", SCRAM_SHA_256).is_none());
        assert!(!format!("{stored:?}").contains("stored_key"));

        // Deleting it works once; the image and a snapshot agree.
        let plan = plan_alter_scram_credentials(&image, &[("alice".into(), SCRAM_SHA_512)], &[]);
        assert_eq!(code_of(&plan.response, "alice"), 0);
        apply(&mut image, &plan);
        assert_eq!(image.scram_credentials().count(), 0);
        let plan = plan_alter_scram_credentials(&image, &[("alice".into(), SCRAM_SHA_512)], &[]);
        assert_eq!(code_of(&plan.response, "alice"), codes::RESOURCE_NOT_FOUND);
    }

    #[test]
    fn records_encode_as_json_and_snapshot() {
        let record = MetadataRecord::ScramCredential(ScramCredentialImage {
            name: "alice".into(),
            mechanism: SCRAM_SHA_256,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations: 4096,
        });
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(
            text,
            r#"{"ScramCredential":{"name":"alice","mechanism":1,"salt":[1],"stored_key":[2],"server_key":[3],"iterations":4096}}"#
        );
        let mut image = MetadataImage::new("c");
        image.replay(0, &record);
        let bytes = crate::snapshot::encode(&image).unwrap();
        let back = crate::snapshot::decode(std::path::Path::new("x"), &bytes, "c").unwrap();
        assert_eq!(back, image);
    }
}
