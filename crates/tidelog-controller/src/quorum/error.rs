//! Errors of the quorum (`QuorumError`) and of controller requests on it
//! (`RequestError`), each with the Kafka error code a broker should answer with.

use std::time::Duration;

use crate::error::{ControllerError, TopicError};
use crate::ops::PartitionError;

/// Kafka error codes used here.
pub(crate) mod codes {
    pub(crate) const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub(crate) const REQUEST_TIMED_OUT: i16 = 7;
    pub(crate) const NOT_CONTROLLER: i16 = 41;
    pub(crate) const STALE_BROKER_EPOCH: i16 = 77;
    pub(crate) const BROKER_ID_NOT_REGISTERED: i16 = 102;
}

/// A failure of the quorum itself.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// Only the leader writes. `leader` is the current leader if this node knows one.
    #[error("this node is not the active controller ({})", match leader {
        Some(id) => format!("the controller leader is node {id}"),
        None => "no controller leader is known".to_owned(),
    })]
    NotController { leader: Option<i32> },
    /// No majority answered in time. The change may still commit later (when enough
    /// voters return), as with any Raft write whose outcome was not observed.
    #[error("the controller quorum did not commit within {0:?}: a majority of the voters may be unreachable")]
    Timeout(Duration),
    #[error("the controller quorum is shut down")]
    ShuttingDown,
    #[error("invalid quorum configuration: {0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Storage(#[from] ControllerError),
    /// The metadata log on disk belongs to a quorum of other voters than configured.
    #[error("this data directory belongs to a controller quorum of voters {stored}, but this node was started with voters {configured}; start it as before (same --quorum, or none for a single node), or give it a new data directory")]
    VotersMismatch { stored: String, configured: String },
    /// The data directory holds a single node's metadata in the format written before
    /// every node ran the Raft controller, and this start cannot take it over.
    #[error("{0}")]
    LegacyMetadata(String),
    #[error("controller quorum failure: {0}")]
    Raft(String),
}

impl QuorumError {
    pub fn error_code(&self) -> i16 {
        match self {
            QuorumError::NotController { .. } | QuorumError::ShuttingDown => codes::NOT_CONTROLLER,
            QuorumError::Timeout(_) => codes::REQUEST_TIMED_OUT,
            _ => codes::UNKNOWN_SERVER_ERROR,
        }
    }
}

/// Why a controller request (topic change, broker registration or heartbeat, producer
/// ids, partition change) failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Topic(#[from] TopicError),
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    /// A partition request (AlterPartition, an election, a reassignment) was refused.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error("broker {broker_id} is not registered")]
    BrokerNotRegistered { broker_id: i32 },
    #[error("broker {broker_id} sent epoch {given}, but its current epoch is {current}")]
    StaleBrokerEpoch {
        broker_id: i32,
        given: i64,
        current: i64,
    },
    /// The error the leader answered a forwarded request with.
    #[error("{message}")]
    Remote { code: i16, message: String },
}

impl RequestError {
    /// The Kafka error code for the response.
    pub fn error_code(&self) -> i16 {
        match self {
            RequestError::Topic(e) => e.error_code(),
            RequestError::Quorum(e) => e.error_code(),
            RequestError::Partition(e) => e.error_code(),
            RequestError::Controller(_) => codes::UNKNOWN_SERVER_ERROR,
            RequestError::BrokerNotRegistered { .. } => codes::BROKER_ID_NOT_REGISTERED,
            RequestError::StaleBrokerEpoch { .. } => codes::STALE_BROKER_EPOCH,
            RequestError::Remote { code, .. } => *code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_match_kafka() {
        let not_controller = QuorumError::NotController { leader: Some(2) };
        assert_eq!(not_controller.error_code(), 41);
        assert_eq!(
            not_controller.to_string(),
            "this node is not the active controller (the controller leader is node 2)"
        );
        assert!(!QuorumError::NotController { leader: None }
            .to_string()
            .contains("None"));
        assert_eq!(QuorumError::Timeout(Duration::from_secs(1)).error_code(), 7);
        assert_eq!(
            RequestError::StaleBrokerEpoch {
                broker_id: 1,
                given: 1,
                current: 2
            }
            .error_code(),
            77
        );
        assert_eq!(
            RequestError::BrokerNotRegistered { broker_id: 1 }.error_code(),
            102
        );
        assert_eq!(
            RequestError::Topic(TopicError::TopicAlreadyExists).error_code(),
            36
        );
    }
}
