//! PushTelemetry (KIP-714): checked as Kafka checks it, then dropped (there is no
//! receiver, and with no subscriptions a client has nothing to push): INVALID_REQUEST
//! for a reserved instance id, UNKNOWN_SUBSCRIPTION_ID for a subscription id this
//! broker did not hand out to that instance, UNSUPPORTED_COMPRESSION_TYPE for an unknown
//! compression type, TELEMETRY_TOO_LARGE beyond the size limit.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::push_telemetry_request::PushTelemetryRequest;
use kafka_protocol::messages::push_telemetry_response::PushTelemetryResponse;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::get_telemetry_subscriptions::{is_reserved, subscription_id, TELEMETRY_MAX_BYTES};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub(crate) async fn handle(_ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: PushTelemetryRequest = req.decode()?;
    req.respond(&PushTelemetryResponse::default().with_error_code(check(&request)))
}

fn check(request: &PushTelemetryRequest) -> i16 {
    let id = request.client_instance_id;
    if is_reserved(id) {
        return ResponseError::InvalidRequest.code();
    }
    if request.subscription_id != subscription_id(id) {
        return ResponseError::UnknownSubscriptionId.code();
    }
    // none, gzip, snappy, lz4, zstd
    if !(0..=4).contains(&request.compression_type) {
        return ResponseError::UnsupportedCompressionType.code();
    }
    if !i32::try_from(request.metrics.len()).is_ok_and(|n| n <= TELEMETRY_MAX_BYTES) {
        return ResponseError::TelemetryTooLarge.code();
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn pushes_are_checked_against_the_handed_out_subscription() {
        let id = Uuid::new_v4();
        let ok = PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_subscription_id(subscription_id(id));
        assert_eq!(check(&ok), 0);
        let wrong = ok.clone().with_subscription_id(subscription_id(id) ^ 1);
        assert_eq!(check(&wrong), ResponseError::UnknownSubscriptionId.code());
        let reserved = ok.clone().with_client_instance_id(Uuid::nil());
        assert_eq!(check(&reserved), ResponseError::InvalidRequest.code());
        let codec = ok.clone().with_compression_type(9);
        assert_eq!(
            check(&codec),
            ResponseError::UnsupportedCompressionType.code()
        );
        let big = ok.with_metrics(bytes::Bytes::from(vec![0u8; 1024 * 1024 + 1]));
        assert_eq!(check(&big), ResponseError::TelemetryTooLarge.code());
    }
}
