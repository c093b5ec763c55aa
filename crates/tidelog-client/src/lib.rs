//! tidelog-client
