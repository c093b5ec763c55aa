//! Authorization: Kafka's StandardAuthorizer over the ACLs of the metadata image
//! (`tidelog_controller::acl`), switched on by `authorizer.class.name`. Handlers ask
//! through one door, [`Request::access`], which answers for the request's principal
//! and client address; without an authorizer every check passes, as before.
//! docs/security.md has the table of which operation each API checks.

mod access;

pub(crate) use access::{denied_code, Access};

use std::sync::{Arc, Mutex};

use tidelog_controller::acl::{AclIndex, AclMap, AuthorizerSettings};
use tidelog_controller::MetadataImage;

use crate::config::BrokerConfig;
use crate::poison::LockTolerant;
use crate::settings;

/// The one authorizer class tidelog implements.
pub(crate) const STANDARD_AUTHORIZER: &str =
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// ZooKeeper-era authorizers, gone from Kafka 4.
const LEGACY_AUTHORIZERS: &[&str] = &[
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
];

/// Why `authorizer.class.name` cannot be `value`, if it cannot.
pub(crate) fn check_authorizer_class(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value.is_empty() || value == STANDARD_AUTHORIZER {
        Ok(())
    } else if LEGACY_AUTHORIZERS.contains(&value) {
        Err(format!("{value} kept its ACLs in ZooKeeper and was removed in Kafka 4.0; use {STANDARD_AUTHORIZER}, whose ACLs live in the metadata log"))
    } else {
        Err(format!(
            "tidelog cannot load Java plug-in classes; the one authorizer is {STANDARD_AUTHORIZER}"
        ))
    }
}

/// The configured authorizer, with the index of the ACLs of the latest image it saw.
pub(crate) struct Authorizer {
    settings: AuthorizerSettings,
    /// The ACL map an index was built from (compared by pointer: the image shares the
    /// map until an ACL record changes it) and that index.
    cache: Mutex<(Arc<AclMap>, Arc<AclIndex>)>,
}

impl Authorizer {
    /// `None` when no authorizer is configured.
    pub(crate) fn from_config(config: &BrokerConfig) -> Option<Authorizer> {
        if config.get(settings::AUTHORIZER_CLASS_NAME).trim() != STANDARD_AUTHORIZER {
            return None;
        }
        let settings = AuthorizerSettings::new(
            &config.get(settings::SUPER_USERS),
            config.get(settings::ALLOW_EVERYONE_IF_NO_ACL_FOUND),
        );
        let empty = Arc::new(AclMap::new());
        let index = Arc::new(AclIndex::new(empty.iter(), settings.clone()));
        Some(Authorizer {
            settings,
            cache: Mutex::new((empty, index)),
        })
    }

    /// `super.users`, as the authorizer read them.
    pub(crate) fn super_users(&self) -> &std::collections::HashSet<String> {
        &self.settings.super_users
    }

    /// The index of `image`'s ACLs (rebuilt only when they changed).
    pub(crate) fn index(&self, image: &MetadataImage) -> Arc<AclIndex> {
        let mut cache = self.cache.locked();
        if !Arc::ptr_eq(&cache.0, image.acls()) {
            let index = AclIndex::new(image.acls().iter(), self.settings.clone());
            *cache = (Arc::clone(image.acls()), Arc::new(index));
        }
        Arc::clone(&cache.1)
    }
}
