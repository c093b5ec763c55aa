//! Which quota applies to a (user, client-id), in the order of Kafka's default quota
//! callback (KIP-55, KIP-257), the first entity with the key winning:
//!
//! 1. user=U, client-id=C        5. user=<default>, client-id=<default>
//! 2. user=U, client-id=<default> 6. user=<default>
//! 3. user=U                      7. client-id=C
//! 4. user=<default>, client-id=C 8. client-id=<default>
//!
//! The sensor the value is recorded in is named by the user and client-id the winning
//! entity has (a default standing for the request's own name), empty for a type the
//! entity lacks: a `user=U` quota is shared by all of U's client-ids.

use std::collections::BTreeMap;

use tidelog_controller::quota::{QuotaEntity, CLIENT_ID, USER};
use tidelog_controller::MetadataImage;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    pub(crate) bound: f64,
    pub(crate) user_tag: String,
    pub(crate) client_tag: String,
}

/// The entity of one level: `Some(Some(name))` named, `Some(None)` the default,
/// `None` the type is absent.
type Level = (Option<Option<String>>, Option<Option<String>>);

fn entity(user: &Option<Option<String>>, client: &Option<Option<String>>) -> QuotaEntity {
    let mut map = BTreeMap::new();
    if let Some(u) = user {
        map.insert(USER.to_string(), u.clone());
    }
    if let Some(c) = client {
        map.insert(CLIENT_ID.to_string(), c.clone());
    }
    QuotaEntity(map)
}

pub(crate) fn resolve(
    image: &MetadataImage,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<Resolved> {
    let u = || Some(Some(user.to_string()));
    let c = || Some(Some(client_id.to_string()));
    let default = || Some(None);
    let levels: [Level; 8] = [
        (u(), c()),
        (u(), default()),
        (u(), None),
        (default(), c()),
        (default(), default()),
        (default(), None),
        (None, c()),
        (None, default()),
    ];
    levels.iter().find_map(|(lu, lc)| {
        let bound = image.client_quota(&entity(lu, lc))?.get(key)?.0;
        Some(Resolved {
            bound,
            user_tag: if lu.is_some() {
                user.to_string()
            } else {
                String::new()
            },
            client_tag: if lc.is_some() {
                client_id.to_string()
            } else {
                String::new()
            },
        })
    })
}
