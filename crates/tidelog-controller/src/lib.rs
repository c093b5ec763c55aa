//! tidelog-controller
