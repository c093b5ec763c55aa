//! Client quotas: AlterClientQuotas and DescribeClientQuotas, as Kafka's admin client
//! sends them (any broker answers; writes are forwarded to the controller).

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::retrying;
use crate::error::{ClientError, Result};
use crate::Client;

/// An entity: `(entity type, name)` pairs, a `None` name being the type's default.
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// What a DescribeClientQuotas component matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    Exact(String),
    Default,
    Any,
}

/// An entity with its quotas, as DescribeClientQuotas lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityQuotas {
    pub entity: QuotaEntity,
    pub values: Vec<(String, f64)>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn describe_entity(entity: &QuotaEntity) -> String {
    entity
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("<default>")))
        .collect::<Vec<_>>()
        .join(",")
}

impl Client {
    /// Sets (`Some`) or removes (`None`) quotas of one entity.
    pub async fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
        ops: &[(String, Option<f64>)],
    ) -> Result<()> {
        retrying!(self, self.alter_client_quotas_once(entity, ops).await)
    }

    /// The entities matching every component (`strict`: and no other entity type).
    pub async fn describe_client_quotas(
        &mut self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<EntityQuotas>> {
        retrying!(
            self,
            self.describe_client_quotas_once(components, strict).await
        )
    }

    async fn alter_client_quotas_once(
        &mut self,
        entity: &QuotaEntity,
        ops: &[(String, Option<f64>)],
    ) -> Result<()> {
        let entry = EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(k, v)| {
                        EntityData::default()
                            .with_entity_type(text(k))
                            .with_entity_name(v.as_deref().map(text))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(key, value)| {
                        OpData::default()
                            .with_key(text(key))
                            .with_value(value.unwrap_or(0.0))
                            .with_remove(value.is_none())
                    })
                    .collect(),
            );
        let request = AlterClientQuotasRequest::default().with_entries(vec![entry]);
        let response = self.send_any(&request).await?;
        let result =
            response.entries.into_iter().next().ok_or_else(|| {
                ClientError::Protocol("AlterClientQuotas answered no entry".into())
            })?;
        ClientError::check(
            result.error_code,
            result.error_message.as_ref().map(StrBytes::as_str),
            || format!("alter client quotas of {}", describe_entity(entity)),
        )
    }

    async fn describe_client_quotas_once(
        &mut self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<EntityQuotas>> {
        let components = components
            .iter()
            .map(|(kind, m)| {
                let (match_type, name) = match m {
                    QuotaMatch::Exact(name) => (0, Some(text(name))),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(text(kind))
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let response = self.send_any(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "describe client quotas".to_owned(),
        )?;
        let mut out: Vec<EntityQuotas> = response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let mut entity: QuotaEntity = e
                    .entity
                    .iter()
                    .map(|d| {
                        (
                            d.entity_type.to_string(),
                            d.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect();
                entity.sort();
                let mut values: Vec<(String, f64)> = e
                    .values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect();
                values.sort_by(|a, b| a.0.cmp(&b.0));
                EntityQuotas { entity, values }
            })
            .collect();
        out.sort_by(|a, b| a.entity.cmp(&b.entity));
        Ok(out)
    }
}
