//! tidelog-protocol
