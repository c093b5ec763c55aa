//! tidelog-broker
