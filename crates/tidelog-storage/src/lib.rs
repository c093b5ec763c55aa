//! tidelog-storage
