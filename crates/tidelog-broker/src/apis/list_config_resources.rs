//! ListConfigResources (74; ListClientMetricsResources before Kafka 4.1, KIP-1142): the
//! resources that can carry configs.
//!
//! v0 lists client-metrics resources only. From v1 the request names resource types
//! (none: all Kafka supports here: TOPIC 2, BROKER 4, BROKER_LOGGER 8,
//! CLIENT_METRICS 16, GROUP 32); any other type makes the whole request
//! UNSUPPORTED_VERSION, as Kafka answers. Topics are every topic (internal ones too),
//! brokers and broker loggers every registered broker by id, groups every group
//! that has group configs. tidelog keeps no client-metrics subscriptions, so that
//! type lists nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_request::ListConfigResourcesRequest;
use kafka_protocol::messages::list_config_resources_response::{
    ConfigResource, ListConfigResourcesResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::MetadataImage;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// The types a version lists, in the order Kafka answers them.
fn supported(version: i16) -> &'static [i8] {
    if version >= 1 {
        &[GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC]
    } else {
        &[CLIENT_METRICS]
    }
}

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: ListConfigResourcesRequest = req.decode()?;
    // DescribeConfigs on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req
        .access(ctx)
        .require_cluster(AclOperation::DescribeConfigs)
    {
        return req.respond(&ListConfigResourcesResponse::default().with_error_code(code));
    }
    let image = ctx.metadata.image();
    let response = match list(&image, &request.resource_types, req.version()) {
        Ok(resources) => ListConfigResourcesResponse::default().with_config_resources(resources),
        Err(code) => ListConfigResourcesResponse::default().with_error_code(code),
    };
    req.respond(&response)
}

fn list(image: &MetadataImage, asked: &[i8], version: i16) -> Result<Vec<ConfigResource>, i16> {
    let supported = supported(version);
    if let Some(bad) = asked.iter().find(|t| !supported.contains(t)) {
        tracing::debug!(resource_type = bad, "ListConfigResources: unsupported type");
        return Err(ResponseError::UnsupportedVersion.code());
    }
    let wanted = |t: i8| asked.is_empty() || asked.contains(&t);
    let entry = |name: String, kind: i8| {
        ConfigResource::default()
            .with_resource_name(StrBytes::from_string(name))
            .with_resource_type(kind)
    };
    let mut resources = Vec::new();
    for kind in supported.iter().copied().filter(|t| wanted(*t)) {
        match kind {
            BROKER | BROKER_LOGGER => resources.extend(
                image
                    .brokers()
                    .map(|b| entry(b.broker_id.to_string(), kind)),
            ),
            TOPIC => resources.extend(image.topics().map(|t| entry(t.name.clone(), TOPIC))),
            GROUP => resources.extend(
                image
                    .groups_with_configs()
                    .map(|g| entry(g.to_string(), GROUP)),
            ),
            // No client-metrics subscriptions are kept.
            _ => {}
        }
    }
    Ok(resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_outside_the_version_are_refused() {
        let image = MetadataImage::new("c");
        assert_eq!(list(&image, &[], 0), Ok(Vec::new()));
        assert_eq!(list(&image, &[CLIENT_METRICS], 0), Ok(Vec::new()));
        let unsupported = Err(ResponseError::UnsupportedVersion.code());
        assert_eq!(list(&image, &[TOPIC], 0), unsupported);
        assert_eq!(list(&image, &[TOPIC, 3], 1), unsupported);
        assert_eq!(list(&image, &[TOPIC, GROUP], 1), Ok(Vec::new()));
    }
}
