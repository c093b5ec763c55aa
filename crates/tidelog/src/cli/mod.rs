//! Client-side operator commands: they talk to a running cluster over the Kafka protocol.

pub(crate) mod consume;
pub(crate) mod produce;
pub(crate) mod topic;
