//! CreateAcls and DeleteAcls on the controller (Kafka's `AclControlManager`): each
//! creation and each filter has its own outcome; the records of the valid ones are
//! written together.

use std::collections::HashSet;

use uuid::Uuid;

use super::Plan;
use crate::acl::{AclEntry, AclFilter, InvalidAcl};
use crate::image::MetadataImage;
use crate::record::MetadataRecord;

/// Adds the valid ACLs not present yet (an identical ACL is not added twice, and its
/// creation succeeds, as in Kafka). `fresh_id` gives random ids; one already in use is
/// skipped.
pub fn plan_create_acls(
    image: &MetadataImage,
    acls: &[AclEntry],
    mut fresh_id: impl FnMut() -> Uuid,
) -> Plan<Vec<Result<(), InvalidAcl>>> {
    let existing: HashSet<&AclEntry> = image.acls().values().collect();
    let mut added: HashSet<&AclEntry> = HashSet::new();
    let mut used: HashSet<Uuid> = HashSet::new();
    let mut records = Vec::new();
    let mut response = Vec::with_capacity(acls.len());
    for acl in acls {
        if let Err(e) = acl.validate() {
            response.push(Err(e));
            continue;
        }
        if !existing.contains(acl) && added.insert(acl) {
            let id = loop {
                let id = fresh_id();
                if !image.acls().contains_key(&id) && used.insert(id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry {
                id,
                acl: acl.clone(),
            });
        }
        response.push(Ok(()));
    }
    Plan { records, response }
}

/// Removes every ACL matching each valid filter; answers, per filter, the ACLs it
/// matched (an ACL matched by two filters is listed by both, removed once).
pub fn plan_delete_acls(
    image: &MetadataImage,
    filters: &[AclFilter],
) -> Plan<Vec<Result<Vec<AclEntry>, InvalidAcl>>> {
    let mut removed: HashSet<Uuid> = HashSet::new();
    let mut records = Vec::new();
    let mut response = Vec::with_capacity(filters.len());
    for filter in filters {
        if let Err(e) = filter.validate() {
            response.push(Err(e));
            continue;
        }
        let mut matched = Vec::new();
        for (id, acl) in image.acls().iter().filter(|(_, acl)| filter.matches(acl)) {
            if removed.insert(*id) {
                records.push(MetadataRecord::RemoveAccessControlEntry { id: *id });
            }
            matched.push(acl.clone());
        }
        response.push(Ok(matched));
    }
    Plan { records, response }
}
