//! GetTelemetrySubscriptions (KIP-714): answered as a Kafka broker with a telemetry
//! receiver but no client-metrics subscriptions answers: the client's instance id (a new
//! one when it sent the zero uuid), no requested metrics (so the client pushes nothing),
//! Kafka's default push interval, accepted compression types and size limit, delta
//! temporality.
//!
//! The subscription id is derived from the instance id and the (empty) subscription, so
//! PushTelemetry can check it without per-client state. Kafka also throttles a client
//! that asks again before its push interval; with nothing subscribed there is nothing a
//! repeated request could cost, and no per-client state is kept for it.

use kafka_protocol::messages::get_telemetry_subscriptions_request::GetTelemetrySubscriptionsRequest;
use kafka_protocol::messages::get_telemetry_subscriptions_response::GetTelemetrySubscriptionsResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;
use uuid::Uuid;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Kafka's `ClientMetricsConfigs.DEFAULT_INTERVAL_MS` (5 minutes).
pub(crate) const PUSH_INTERVAL_MS: i32 = 5 * 60 * 1000;

/// Kafka's `telemetry.max.bytes` default.
pub(crate) const TELEMETRY_MAX_BYTES: i32 = 1024 * 1024;

/// Kafka's order: zstd, lz4, gzip, snappy.
const ACCEPTED_COMPRESSION_TYPES: [i8; 4] = [4, 3, 1, 2];

/// The id of the (empty) subscription of a client instance.
pub(crate) fn subscription_id(client_instance_id: Uuid) -> i32 {
    let x = client_instance_id.as_u128();
    let folded = (x ^ (x >> 32) ^ (x >> 64) ^ (x >> 96)) as u32;
    // Truncation intended: a 32-bit digest of the instance and the push interval.
    (folded ^ PUSH_INTERVAL_MS.unsigned_abs()) as i32
}

/// Kafka's reserved ids (zero and the metadata topic's) are never handed out.
pub(crate) fn is_reserved(id: Uuid) -> bool {
    id.as_u128() <= 1
}

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: GetTelemetrySubscriptionsRequest = req.decode()?;
    let mut id = request.client_instance_id;
    while is_reserved(id) {
        id = Uuid::new_v4();
    }
    let response = GetTelemetrySubscriptionsResponse::default()
        .with_client_instance_id(id)
        .with_subscription_id(subscription_id(id))
        .with_accepted_compression_types(ACCEPTED_COMPRESSION_TYPES.to_vec())
        .with_push_interval_ms(PUSH_INTERVAL_MS)
        .with_telemetry_max_bytes(TELEMETRY_MAX_BYTES)
        .with_delta_temporality(true)
        .with_requested_metrics(Vec::new());
    req.respond(&response)
}
