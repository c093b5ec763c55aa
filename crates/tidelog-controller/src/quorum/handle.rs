//! [`ControllerHandle`]: one type for the broker to talk to the controller quorum,
//! whether this node is a voter ([`QuorumController`]) or a broker-only node
//! ([`ControllerClient`]). Both variants go through the same typed requests of
//! `api.rs`, so a broker's code does not care which one it holds.

use std::sync::Arc;
use std::time::Duration;

use super::api::Route;
use super::client::ControllerClient;
use super::controller::QuorumController;
use super::error::RequestError;
use super::forward::{ForwardReply, ForwardedCall};
use super::MetadataQuorum;
use crate::image::MetadataImage;

/// The controller as seen from a broker: a local voter or a remote quorum.
#[derive(Debug, Clone)]
pub enum ControllerHandle {
    /// This node is a controller voter; requests run here or are forwarded to the
    /// leader (one hop).
    Voter(Arc<QuorumController>),
    /// This node only runs a broker; requests go to the voters over their RPC port.
    Remote(Arc<ControllerClient>),
}

impl ControllerHandle {
    super::api::controller_requests!();

    /// The metadata image once it is newer than `after` (the last offset of the image
    /// the caller has), waiting up to `max_wait`; `None` if nothing newer came.
    /// A voter waits on its own image; a remote handle long-polls a voter.
    pub async fn image_after(
        &self,
        after: Option<u64>,
        max_wait: Duration,
    ) -> Result<Option<Arc<MetadataImage>>, RequestError> {
        match self {
            ControllerHandle::Voter(controller) => {
                let mut images = controller.quorum().watch_image();
                let _ = tokio::time::timeout(
                    max_wait,
                    images.wait_for(|image| image.last_offset() > after),
                )
                .await;
                let image = controller.image();
                Ok((image.last_offset() > after).then_some(image))
            }
            ControllerHandle::Remote(client) => {
                Ok(client.fetch_image(after, max_wait).await?.map(Arc::new))
            }
        }
    }

    /// The same as [`ControllerHandle::image_after`] (the name `ControllerClient` uses).
    pub async fn fetch_image(
        &self,
        after: Option<u64>,
        max_wait: Duration,
    ) -> Result<Option<Arc<MetadataImage>>, RequestError> {
        self.image_after(after, max_wait).await
    }
}

impl Route for ControllerHandle {
    async fn route(&self, call: ForwardedCall) -> Result<ForwardReply, RequestError> {
        match self {
            ControllerHandle::Voter(controller) => controller.route(call).await,
            ControllerHandle::Remote(client) => client.route(call).await,
        }
    }
}

impl From<Arc<QuorumController>> for ControllerHandle {
    fn from(controller: Arc<QuorumController>) -> Self {
        ControllerHandle::Voter(controller)
    }
}

impl From<Arc<ControllerClient>> for ControllerHandle {
    fn from(client: Arc<ControllerClient>) -> Self {
        ControllerHandle::Remote(client)
    }
}
