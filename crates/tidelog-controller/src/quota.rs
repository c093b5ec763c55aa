//! Client quotas in the metadata: Kafka's QuotaRecord, its replay, AlterClientQuotas
//! planned as Kafka's `ClientQuotaControlManager` plans it, and DescribeClientQuotas
//! answered from the image as Kafka's `ClientQuotasImage.describe` answers it.
//!
//! An entity maps entity types (`user`, `client-id`, `ip`) to a name, `None` being
//! the type's default (`<default>` in Kafka's tools). Each (entity, key) has at most
//! one value; removing the last key of an entity removes the entity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::image::MetadataImage;
use crate::ops::Plan;
use crate::record::MetadataRecord;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Kafka's INVALID_REQUEST, the code of every refusal here.
const INVALID_REQUEST: i16 = 42;

/// Kafka's `ClientQuotaEntity`: entity type to name, `None` = the default entity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaEntity(pub BTreeMap<String, Option<String>>);

impl QuotaEntity {
    pub fn get(&self, kind: &str) -> Option<Option<&str>> {
        self.0.get(kind).map(Option::as_deref)
    }

    /// `user=alice,client-id=<default>` (the form Kafka's tools print).
    pub fn describe(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("<default>")))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A quota value. Values are checked finite when set, so comparing bits is equality.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Every stored quota, by entity then key.
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// One entry of an AlterClientQuotas request: the entity as sent (types may repeat,
/// which is refused) and its operations, `None` removing the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<(String, Option<f64>)>,
}

/// One entry's outcome: the entity as sent, error code, message.
pub type QuotaResult = (Vec<(String, Option<String>)>, i16, Option<String>);

/// One component of a DescribeClientQuotas filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// The entity has this type with exactly this name.
    Exact(String),
    /// The entity has this type's default.
    Default,
    /// The entity has this type, with any name or the default.
    Specified,
}

/// How a key's value is checked: Kafka's LONG keys must be whole numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Long,
    Double,
}

/// The keys an entity of user and/or client-id may set (Kafka's userConfigs and
/// clientConfigs share these four).
const USER_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    (REQUEST_PERCENTAGE, KeyType::Double),
    (CONTROLLER_MUTATION_RATE, KeyType::Double),
];
const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Long)];

/// The keys an entity may set, with their types.
type Keys = &'static [(&'static str, KeyType)];
/// A refusal: error code and Kafka's message.
type Refusal = (i16, String);

impl MetadataImage {
    /// Every client quota, by entity.
    pub fn client_quotas(&self) -> &ClientQuotas {
        &self.quotas
    }

    /// The quotas of exactly this entity.
    pub fn client_quota(&self, entity: &QuotaEntity) -> Option<&BTreeMap<String, QuotaValue>> {
        self.quotas.get(entity)
    }

    pub(crate) fn replay_quota(&mut self, entity: &QuotaEntity, key: &str, value: Option<f64>) {
        match value {
            Some(v) => {
                self.quotas
                    .entry(entity.clone())
                    .or_default()
                    .insert(key.to_string(), QuotaValue(v));
            }
            None => {
                if let Some(keys) = self.quotas.get_mut(entity) {
                    keys.remove(key);
                    if keys.is_empty() {
                        self.quotas.remove(entity);
                    }
                }
            }
        }
    }
}

fn refuse(message: impl Into<String>) -> Refusal {
    (INVALID_REQUEST, message.into())
}

/// Kafka's validateEntity and configKeysForEntityType: the entity as a map and the
/// keys it may set.
fn check_entity(entity: &[(String, Option<String>)]) -> Result<(QuotaEntity, Keys), Refusal> {
    if entity.is_empty() {
        return Err(refuse("Invalid empty client quota entity"));
    }
    let mut map = BTreeMap::new();
    for (kind, name) in entity {
        if map.contains_key(kind) {
            return Err(refuse(format!(
                "Invalid empty client quota entity, duplicate entity entry {kind}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
            return Err(refuse(format!(
                "Unhandled client quota entity type: {kind}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(refuse(format!("Empty {kind} not supported")));
        }
        map.insert(kind.clone(), name.clone());
    }
    let entity = QuotaEntity(map);
    let has = |k: &str| entity.0.contains_key(k);
    let keys = match (has(USER), has(CLIENT_ID), has(IP)) {
        (true, _, false) | (false, true, false) => USER_CLIENT_KEYS,
        (false, false, true) => {
            // Kafka also resolves host names here; a controller that looks names up
            // in DNS would answer differently on every voter, so only addresses pass.
            if let Some(Some(ip)) = entity.get(IP) {
                if ip.parse::<std::net::IpAddr>().is_err() {
                    return Err(refuse(format!(
                        "{ip} is not a valid IP or resolvable host."
                    )));
                }
            }
            IP_KEYS
        }
        _ => return Err(refuse("Invalid empty client quota entity")),
    };
    Ok((entity, keys))
}

/// Kafka's validateQuotaKeyValue, plus a positive finite value: a rate of zero or
/// below makes the throttle time (`(observed - bound) / bound`) meaningless.
fn check_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), Refusal> {
    let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(refuse(format!("Invalid configuration key {key}")));
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(refuse(format!(
            "Configuration {key} must be a positive number, not {value}"
        )));
    }
    if *kind == KeyType::Long {
        let epsilon = 1e-6;
        if ((value + epsilon).trunc() - value).abs() > epsilon || value >= i64::MAX as f64 {
            return Err(refuse(format!("Configuration {key} must be a Long value")));
        }
    }
    Ok(())
}

/// AlterClientQuotas: each entry succeeds or fails on its own; the records of the
/// valid ones are written together (none with `validate_only`). An entity named twice
/// in one request fails the second time, as Kafka answers.
pub fn plan_alter_client_quotas(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
    validate_only: bool,
) -> Plan<Vec<QuotaResult>> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(alterations.len());
    let mut seen: Vec<QuotaEntity> = Vec::new();
    for alteration in alterations {
        let outcome = plan_one(image, alteration, &mut seen);
        match outcome {
            Ok(mut planned) => {
                records.append(&mut planned);
                results.push((alteration.entity.clone(), 0, None));
            }
            Err((code, message)) => {
                results.push((alteration.entity.clone(), code, Some(message)));
            }
        }
    }
    if validate_only {
        records.clear();
    }
    Plan {
        records,
        response: results,
    }
}

fn plan_one(
    image: &MetadataImage,
    alteration: &QuotaAlteration,
    seen: &mut Vec<QuotaEntity>,
) -> Result<Vec<MetadataRecord>, Refusal> {
    let (entity, keys) = check_entity(&alteration.entity)?;
    if seen.contains(&entity) {
        return Err(refuse(format!(
            "Ignoring duplicate entity {}",
            entity.describe()
        )));
    }
    seen.push(entity.clone());
    let current = image.client_quota(&entity);
    let mut records = Vec::new();
    for (i, (key, value)) in alteration.ops.iter().enumerate() {
        if alteration.ops[..i].iter().any(|(k, _)| k == key) {
            return Err(refuse(format!(
                "Duplicate quota key {key} not updating quota for this entity {}",
                entity.describe()
            )));
        }
        let now = current.and_then(|c| c.get(key)).copied();
        match value {
            None => {
                if now.is_some() {
                    records.push(MetadataRecord::ClientQuota {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: None,
                    });
                }
            }
            Some(v) => {
                check_value(keys, key, *v)?;
                if now != Some(QuotaValue(*v)) {
                    records.push(MetadataRecord::ClientQuota {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: Some(QuotaValue(*v)),
                    });
                }
            }
        }
    }
    Ok(records)
}

/// DescribeClientQuotas over the image: every entity with, for each component, the
/// type and the name asked; with `strict`, no other types. No components and not
/// strict: every entity.
pub fn describe_client_quotas<'a>(
    image: &'a MetadataImage,
    components: &[(String, QuotaMatch)],
    strict: bool,
) -> Vec<(&'a QuotaEntity, &'a BTreeMap<String, QuotaValue>)> {
    image
        .quotas
        .iter()
        .filter(|(entity, _)| {
            components
                .iter()
                .all(|(kind, m)| match (m, entity.get(kind)) {
                    (QuotaMatch::Exact(name), Some(Some(n))) => n == name,
                    (QuotaMatch::Default, Some(None)) => true,
                    (QuotaMatch::Specified, Some(_)) => true,
                    _ => false,
                })
                && (!strict || entity.0.len() == components.len())
        })
        .collect()
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
